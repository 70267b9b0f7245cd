"""evaluate(out_dir=D) from Python never replaces the run already in D unless asked (overwrite=True), as
``gem eval --out D`` refuses without ``--overwrite``; resume=True continues it."""

from __future__ import annotations

import asyncio

import pytest
from scripted_backend import OneStepBackend

from gem_core.eval import EvalConfig, evaluate, evaluate_async
from gem_core.eval.config import existing_run

EASY = "game:GuessTheNumber-v0-easy"
RUN_FILES = ("run.json", "episodes.jsonl", "report.json")


def _run(out, **kwargs):
    backend = OneStepBackend()
    report = evaluate([EASY], backend=backend, out_dir=str(out), plots=False, progress=False, **kwargs)
    return backend, report


def test_an_out_dir_holding_a_run_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "run"
    _run(out, episodes=3)
    before = {name: (out / name).read_bytes() for name in RUN_FILES}
    backend = OneStepBackend()
    with pytest.raises(ValueError) as caught:
        evaluate([EASY], backend=backend, episodes=1, out_dir=str(out), plots=False, progress=False)
    assert str(caught.value) == (
        f"out_dir {out} already holds a run (its episodes.jsonl); continue it with resume=True, replace it with "
        "overwrite=True, or choose another out_dir."
    )
    assert backend.episodes == 0
    assert {name: (out / name).read_bytes() for name in RUN_FILES} == before


def test_evaluate_async_refuses_it_too(tmp_path):
    out = tmp_path / "run"
    _run(out, episodes=2)
    with pytest.raises(ValueError, match=r"^out_dir .* already holds a run \(its episodes\.jsonl\); continue it with resume=True"):
        asyncio.run(evaluate_async(OneStepBackend(), EvalConfig(env_ids=[EASY], episodes=1, out_dir=str(out), progress=False)))
    assert len((out / "episodes.jsonl").read_bytes().splitlines()) == 2


def test_overwrite_true_replaces_the_run_and_resume_continues_it(tmp_path):
    out = tmp_path / "run"
    _run(out, episodes=3)
    backend, report = _run(out, episodes=2, overwrite=True)
    assert backend.episodes == 2 and report.episodes_finished == 2
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    (out / "episodes.jsonl").write_bytes(lines[0])  # as if stopped after one episode
    backend, report = _run(out, episodes=2, resume=True)
    assert backend.episodes == 1 and report.episodes_finished == 2


def test_a_report_alone_counts_as_a_run_and_an_empty_log_does_not(tmp_path):
    assert existing_run(tmp_path / "missing") is None
    (tmp_path / "episodes.jsonl").write_text("")
    assert existing_run(tmp_path) is None
    (tmp_path / "report.json").write_text("{}")
    assert existing_run(tmp_path) == "its report.json"


def test_resume_and_overwrite_together_are_refused():
    with pytest.raises(ValueError, match=r"^resume=True continues the run in out_dir and overwrite=True replaces it; give one"):
        EvalConfig(env_ids=[EASY], out_dir="x", resume=True, overwrite=True)


def test_overwrite_removes_the_old_report_and_plots_before_the_first_episode(tmp_path):
    """A run killed mid-way must not leave the replaced run's report.json (or plots) beside its own episodes:
    --compare and --rescore would read the old model's numbers as this run's."""
    from gem_core.eval.plots import DISTRIBUTION_PLOT, SUMMARY_PLOT

    out = tmp_path / "run"
    _run(out, episodes=3)
    for name in (SUMMARY_PLOT, DISTRIBUTION_PLOT):
        (out / name).write_bytes(b"old plot")
    seen = []

    class Looking(OneStepBackend):
        async def run_episode(self, env, env_id, seed, config, record):
            seen.append(sorted(p.name for p in out.iterdir() if not p.name.startswith(".")))
            await super().run_episode(env, env_id, seed, config, record)

    evaluate([EASY], backend=Looking(), episodes=1, out_dir=str(out), plots=False, progress=False, overwrite=True)
    assert seen == [["episodes.jsonl", "run.json"]]
