"""Open-ended tasks a judge model scores, ids ``judge:<Name>`` (issue 34).

Each episode is one task (an explanation, a short essay, advice) with a reference answer; the answer is
free text, scored by a :class:`~gem_core.judge.Judge` against a rubric through the
:class:`~gem_core.wrappers.judged.Judged` wrapper. Build one with a judge::

    make("judge:Sample", judge=Judge("http://127.0.0.1:8000/v1", "qwen3-8b", cache="verdicts.sqlite"))

or ``judge_url=``/``judge_model=``/``judge_cache=``; ``gem eval``/``gem replay`` take ``--judge-url`` and
``--judge-model``. Without a judge every answer pays 0 with ``info["error"]`` naming the fix.
``judge:Sample`` reads the small set shipped in ``data/sample.jsonl`` (columns ``task``, ``reference``);
``make("judge:Sample", data_files="rows.jsonl")`` reads your own rows with the same columns instead.
"""

from pathlib import Path

from gem_core.registry import register

_ENV = "gem_core.envs.judged.env:make_judged_task"
SAMPLE_FILE = str(Path(__file__).parent / "data" / "sample.jsonl")
SAMPLE_KWARGS = {"data_files": SAMPLE_FILE}

register("judge:Sample", _ENV, sample_kwargs=SAMPLE_KWARGS, extras=("judge",), data_files=SAMPLE_FILE)
