"""Open-domain question answering, ids ``qa:<Dataset>``: exact match / F1 against gold answers after
SQuAD normalization (:mod:`gem_core.envs.qa.scoring`).

``qa:<Dataset>-search`` adds the search tool (:mod:`gem_core.envs.qa.search_variant`): the model may query
a retrieval server (``search_url=``, default ``$GEM_SEARCH_URL`` or ``http://127.0.0.1:8000/retrieve``)
before it answers.

Every id reads its hub dataset through ``datasets``; pass ``data_files="rows.jsonl"`` to
:func:`gem_core.make` to read a local copy with the same columns instead. ``qa:Sample`` reads the small
set shipped in ``data/sample.jsonl`` and works offline; every id's ``sample_kwargs`` point it there too.
"""

from pathlib import Path

from gem_core.envs.dataset import register_hub_datasets

_ENV = "gem_core.envs.qa.env:QAEnv"
_ENV_WITH_SEARCH = "gem_core.envs.qa.search_variant:make_qa_with_search"
SAMPLE_FILE = str(Path(__file__).parent / "data" / "sample.jsonl")
SAMPLE_KWARGS = {"data_files": SAMPLE_FILE, "question_field": "question", "answer_field": "answer"}

#: axon-rl/search-eval's split -> the name in the id (qa:SearchEval-<name>).
SEARCH_EVAL_SPLITS = {
    "2wiki": "2Wiki", "popqa": "PopQA", "tq": "TriviaQA", "hotpotqa": "HotpotQA", "bamboogle": "Bamboogle",
    "nq": "NaturalQuestions", "musique": "Musique",
}

# id -> (hub id, config, split, question column, answer column)
HUB_DATASETS: dict[str, tuple[str, str | None, str, str, str]] = {
    "NaturalQuestions": ("google-research-datasets/nq_open", None, "train", "question", "answer"),
    "NaturalQuestions-validation": ("google-research-datasets/nq_open", None, "validation", "question", "answer"),
    "HotpotQA": ("hotpotqa/hotpot_qa", "distractor", "train", "question", "answer"),
    "HotpotQA-validation": ("hotpotqa/hotpot_qa", "distractor", "validation", "question", "answer"),
    "TriviaQA": ("mandarjoshi/trivia_qa", "rc.nocontext", "train", "question", "answer"),
    "TriviaQA-validation": ("mandarjoshi/trivia_qa", "rc.nocontext", "validation", "question", "answer"),
    # The NQ + HotpotQA training mix of Search-R1.
    "NQ-HotpotQA": ("PeterJinGo/nq_hotpotqa_train", None, "train", "question", "golden_answers"),
    # The test sets of DeepResearcher (512 questions per source), one split each of axon-rl/search-eval;
    # upstream GEM's eval:<Name> ids are aliases of these.
    **{
        f"SearchEval-{name}": ("axon-rl/search-eval", None, split, "question", "answer")
        for split, name in SEARCH_EVAL_SPLITS.items()
    },
}

register_hub_datasets(
    "qa", {"": _ENV, "-search": _ENV_WITH_SEARCH}, SAMPLE_KWARGS, HUB_DATASETS, ("question_field", "answer_field"), extras=("qa",)
)
