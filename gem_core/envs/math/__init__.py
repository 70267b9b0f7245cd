"""Math word problems, ids ``math:<Dataset>``: one question per episode, the answer in ``\\boxed{}``,
graded by math-verify in a time-limited worker (see :mod:`gem_core.envs.math.grading`).

``math:<Dataset>-python`` adds the Python tool (:mod:`gem_core.envs.math.python_variant`): the model may
run programs before it answers.

Every id reads its hub dataset through ``datasets`` (needs the network once, then the HF cache); pass
``data_files="rows.jsonl"`` to :func:`gem_core.make` to read a local copy with the same columns instead.
``math:Sample`` reads the small set shipped in ``data/sample.jsonl`` and works offline; every id's
``sample_kwargs`` point it at that set too.
"""

from pathlib import Path

from gem_core.envs.dataset import register_hub_datasets
from gem_core.registry import register

_ENV = "gem_core.envs.math.env:MathEnv"
_ENV_WITH_PYTHON = "gem_core.envs.math.python_variant:make_math_with_python"
SAMPLE_FILE = str(Path(__file__).parent / "data" / "sample.jsonl")
SAMPLE_KWARGS = {"data_files": SAMPLE_FILE, "question_field": "problem", "answer_field": "answer", "answer_format": "plain"}

# id -> (hub id, config, split, question column, answer column, answer format)
HUB_DATASETS: dict[str, tuple[str, str | None, str, str, str, str]] = {
    "GSM8K": ("openai/gsm8k", "main", "train", "question", "answer", "gsm8k"),
    "GSM8K-test": ("openai/gsm8k", "main", "test", "question", "answer", "gsm8k"),
    "MATH": ("DigitalLearningGmbH/MATH-lighteval", "default", "train", "problem", "solution", "boxed"),
    "MATH-test": ("DigitalLearningGmbH/MATH-lighteval", "default", "test", "problem", "solution", "boxed"),
    "MATH-500": ("HuggingFaceH4/MATH-500", None, "test", "problem", "answer", "plain"),
    "Math12K": ("axon-rl/MATH-12k", None, "train", "problem", "answer", "plain"),
    "DeepScaleR": ("agentica-org/DeepScaleR-Preview-Dataset", None, "train", "problem", "answer", "plain"),
    "AIME24": ("HuggingFaceH4/aime_2024", None, "train", "problem", "answer", "plain"),
    # Upstream GEM's training sets (axon-rl's copies, problem/answer columns).
    "ASDiv2K": ("axon-rl/ASDIV-2k", None, "train", "problem", "answer", "plain"),
    "Math8K-3to5": ("axon-rl/MATH-lvl3to5-8k", None, "train", "problem", "answer", "plain"),
    "Orz57K": ("axon-rl/ORZ-57k", None, "train", "problem", "answer", "plain"),
    # Upstream GEM's evaluation sets: one split each of axon-rl/math-eval (its eval:AMC, ... ids are aliases).
    "AMC": ("axon-rl/math-eval", None, "amc", "problem", "answer", "plain"),
    "OlympiadBench": ("axon-rl/math-eval", None, "olympiad_bench", "problem", "answer", "plain"),
    "Minerva": ("axon-rl/math-eval", None, "minerva", "problem", "answer", "plain"),
}

register_hub_datasets(
    "math", {"": _ENV, "-python": _ENV_WITH_PYTHON}, SAMPLE_KWARGS, HUB_DATASETS,
    ("question_field", "answer_field", "answer_format"), extras=("math",),
)

# Geometry problems drawn as figures: the images travel in the first step's info["images"] (see
# gem_core.envs.math.visual). Its sample has figures of its own, so it is registered apart.
GEOMETRY_SAMPLE_FILE = str(Path(__file__).parent / "data" / "geometry_sample.jsonl")
register(
    "math:Geometry3K",
    "gem_core.envs.math.visual:MathVisualEnv",
    sample_kwargs={"data_files": GEOMETRY_SAMPLE_FILE},
    extras=("math", "vision"),
    dataset_path="axon-rl/geometry3k",
    split="train",
    question_field="problem",
    answer_field="answer",
    image_field="images",
)
