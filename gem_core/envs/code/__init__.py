"""Programming problems, ids ``code:<Dataset>``: the model's program runs against the problem's tests in
the Python sandbox (:mod:`gem_core.tools.sandbox`); stdin/stdout and function-call tests.

Every id reads its hub dataset through ``datasets``; pass ``data_files="rows.jsonl"`` to
:func:`gem_core.make` to read a local copy with the same columns instead. ``code:Sample`` reads the small
set shipped in ``data/sample.jsonl`` and works offline; every id's ``sample_kwargs`` point it there too.
"""

from pathlib import Path

from gem_core.envs.dataset import register_hub_datasets

_ENV = "gem_core.envs.code.env:CodeEnv"
SAMPLE_FILE = str(Path(__file__).parent / "data" / "sample.jsonl")
SAMPLE_KWARGS = {"data_files": SAMPLE_FILE, "question_field": "problem", "tests_field": "tests"}

# id -> (hub id, config, split, problem column, tests column)
HUB_DATASETS: dict[str, tuple[str, str | None, str, str, str]] = {
    # deepmind/code_contests with public, private and generated tests merged into {"inputs", "outputs"}.
    "CodeContest": ("axon-rl/CodeContest", None, "train", "problem", "tests"),
    "CodeContest-test": ("axon-rl/CodeContest", None, "test", "problem", "tests"),
    # TACO problems whose tests were verified; `input_output` is APPS-style JSON (with fn_name for call tests).
    "TACO": ("likaixin/TACO-verified", None, "train", "question", "input_output"),
    # Upstream GEM's training sets, in CodeContest's {"inputs", "outputs"} test format.
    "Taco8k": ("axon-rl/TACO-8k", None, "train", "problem", "tests"),
    "PrimeIntellect15k": ("axon-rl/PrimeIntellect-15k", None, "train", "problem", "tests"),
}

register_hub_datasets("code", {"": _ENV}, SAMPLE_KWARGS, HUB_DATASETS, ("question_field", "tests_field"), extras=("code",))
