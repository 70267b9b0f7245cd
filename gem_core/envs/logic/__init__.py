"""Deductive reasoning over stated facts and rules, ids ``logic:<Dataset>``: a theory in plain English and
a statement; the answer (``True`` or ``False``) goes in ``\\boxed{}``, scored by exact match as in the QA
envs (:class:`gem_core.envs.qa.env.QAEnv`, one step per episode).

``logic:RuleTaker-d<N>`` are upstream GEM's RuleTaker sets (axon-rl/RuleTaker-d<N>-70k: statements that
need up to N steps of inference; there is no d4). Every id reads its hub dataset through ``datasets``;
pass ``data_files="rows.jsonl"`` to :func:`gem_core.make` to read a local copy with the same columns
instead. ``logic:Sample`` reads the small set shipped in ``data/sample.jsonl`` and works offline; every
id's ``sample_kwargs`` point it there too.
"""

from pathlib import Path

from gem_core.envs.dataset import register_hub_datasets

_ENV = "gem_core.envs.qa.env:QAEnv"
SAMPLE_FILE = str(Path(__file__).parent / "data" / "sample.jsonl")
SAMPLE_KWARGS = {"data_files": SAMPLE_FILE, "question_field": "question", "answer_field": "answer"}
#: The QA env's hint asks for "a short phrase"; these answers are truth values.
PROMPT_SUFFIX = "\n\nDecide from the facts and rules alone, then put True or False inside \\boxed{}, e.g. \\boxed{True}."

# id -> (hub id, config, split, question column, answer column, prompt suffix)
HUB_DATASETS: dict[str, tuple[str, str | None, str, str, str, str]] = {
    f"RuleTaker-d{depth}": (f"axon-rl/RuleTaker-d{depth}-70k", None, "train", "question", "answer", PROMPT_SUFFIX)
    for depth in (0, 1, 2, 3, 5)
}

register_hub_datasets(
    "logic", {"": _ENV}, {**SAMPLE_KWARGS, "prompt_suffix": PROMPT_SUFFIX}, HUB_DATASETS,
    ("question_field", "answer_field", "prompt_suffix"), extras=("qa",),
)
