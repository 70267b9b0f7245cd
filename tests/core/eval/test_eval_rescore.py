"""`gem eval --rescore DIR`: the stored transcripts re-graded by the current env, without the model; the
new report lists exactly the episodes a grader change affected."""

from __future__ import annotations

import json

import pytest
from openai_test_server import OpenAITestServer

from changed_graders import OneOffGuessTheNumber
from gem_core.eval.cli import main

EASY = "game:GuessTheNumber-v0-easy"



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, binary_search):
    out = tmp_path_factory.mktemp("run")
    with OpenAITestServer(respond=lambda messages: binary_search("\n".join(m["content"] for m in messages))) as server:
        assert main(["--model", "m", "--base-url", server.base_url, "--env", EASY, "--episodes", "8", "--max-turns", "2",
                     "--no-progress", "--no-plots", "--out", str(out)]) == 0
    return out


def _strip(report):
    return {k: v for k, v in report.items() if k not in ("rescore", "started_at", "finished_at")}


def test_rescore_with_an_unchanged_grader_changes_nothing(run_dir, tmp_path, capsys):
    assert main(["--rescore", str(run_dir), "--out", str(tmp_path), "--no-plots"]) == 0
    assert "8 episodes re-scored, 0 changed" in capsys.readouterr().out
    rescored = json.loads((tmp_path / "report.json").read_text())
    assert rescored["rescore"]["changed"] == [] and rescored["rescore"]["from"] == str(run_dir)
    assert _strip(rescored) == _strip(json.loads((run_dir / "report.json").read_text()))


def test_rescore_after_a_grader_change_reports_exactly_the_changed_episodes(run_dir, monkeypatch, capsys):
    from gem_core import registry

    original = json.loads((run_dir / "report.json").read_text())
    kwargs = registry.spec(EASY).kwargs

    # What the changed grader says, computed here from the transcripts without gem eval's code.
    expected = {}
    for episode in original["envs"][EASY]["episodes"]:
        env = OneOffGuessTheNumber(**kwargs)
        env.reset(seed=episode["seed"])
        actions = [m["content"] for m in episode["transcript"] if m["role"] == "assistant"]
        rewards = []
        for turn, action in enumerate(actions):
            _, reward, terminated, truncated, _ = env.step(action)
            rewards.append(reward)
            if terminated or truncated or turn + 1 == 2:  # --max-turns 2
                break
        if rewards != episode["rewards"]:
            expected[episode["seed"]] = rewards
    assert expected, "the changed grader must change some episodes for this test to mean anything"
    assert len(expected) < 8, "and leave some alone"

    monkeypatch.setitem(registry._REGISTRY, EASY, registry.EnvSpec(EASY, OneOffGuessTheNumber, kwargs=dict(kwargs)))
    assert main(["--rescore", str(run_dir), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert f"8 episodes re-scored, {len(expected)} changed" in out
    for seed in expected:
        assert f"{EASY} seed {seed}: return" in out

    rescored = json.loads((run_dir / "rescored" / "report.json").read_text())
    assert sorted(c["seed"] for c in rescored["rescore"]["changed"]) == sorted(expected)
    episodes = {e["seed"]: e for e in rescored["envs"][EASY]["episodes"]}
    for seed, rewards in expected.items():
        assert episodes[seed]["rewards"] == rewards and episodes[seed]["success"] is True
        assert episodes[seed]["transcript"] == original["envs"][EASY]["episodes"][seed]["transcript"]  # as the model saw it
    summary = rescored["envs"][EASY]["summary"]
    assert summary["success_rate"] == pytest.approx(sum(e["success"] for e in episodes.values()) / 8)
    assert summary["success_rate"] > original["envs"][EASY]["summary"]["success_rate"]
    assert json.loads((run_dir / "report.json").read_text()) == original  # the source run is left alone


def test_rescore_of_a_killed_run_reads_its_episode_log(run_dir, tmp_path, capsys):
    import shutil

    killed = tmp_path / "killed"
    shutil.copytree(run_dir, killed, ignore=shutil.ignore_patterns("rescored"))  # another test's rescore of run_dir
    (killed / "report.json").unlink()  # what a SIGKILL leaves: run.json and episodes.jsonl
    lines = (killed / "episodes.jsonl").read_text().splitlines(keepends=True)
    (killed / "episodes.jsonl").write_text("".join(lines[:5]))
    assert main(["--rescore", str(killed), "--no-plots"]) == 0
    assert "5 episodes re-scored, 0 changed" in capsys.readouterr().out
    rescored = json.loads((killed / "rescored" / "report.json").read_text())
    assert rescored["interrupted"] is True and len(rescored["envs"][EASY]["episodes"]) == 5


def test_rescore_says_what_is_wrong_with_the_folder(tmp_path, capsys):
    assert main(["--rescore", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gem eval: --rescore:") and "holds no gem eval run" in err and err.count("\n") == 1


def test_a_replayed_step_that_fails_fails_the_rescored_episode_instead_of_scoring_it_0():
    """A judge that gives no verdict on rescoring (info["error"], paid 0) is the rescore's failure, by the
    backends' one rule (report.step_error), not a new score of 0 that would count in the rates."""
    from gem_core.env import Env
    from gem_core.eval.report import EpisodeRecord
    from gem_core.eval.rescore import rescore_record

    class JudgeDown(Env):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return "question", {}

        def step(self, action):
            return "", 0.0, True, False, {"error": "judge: cannot connect"}

        def sample_random_action(self):
            return "answer"

    record = EpisodeRecord(env_id="judge:Sample", seed=0, rewards=[0.775], success=True, terminated=True,
                           transcript=[{"role": "user", "content": "question"}, {"role": "assistant", "content": "answer"}])
    rescored, turns = rescore_record(record, JudgeDown())
    assert rescored.failed and rescored.error == "env step failed: judge: cannot connect"
    assert turns and turns[0]["stored_reward"] == 0.775


def test_rescore_never_replaces_another_run_unasked(run_dir, tmp_path, capsys):
    """--out naming a folder that holds a run is refused as for a new run (--overwrite replaces it), and --out
    naming the run's own folder is refused: its report.json is the original the rescore is compared with."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(run_dir, other, ignore=shutil.ignore_patterns("rescored"))
    (other / "report.json").write_text(json.dumps({**json.loads((run_dir / "report.json").read_text()), "model": "other"}))
    before = {p.name: p.read_bytes() for p in other.iterdir()}
    assert main(["--rescore", str(run_dir), "--out", str(other), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err and err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in other.iterdir()} == before

    assert main(["--rescore", str(run_dir), "--out", str(other), "--no-plots", "--overwrite"]) == 0
    assert json.loads((other / "report.json").read_text())["rescore"]["from"] == str(run_dir)
    assert main(["--rescore", str(run_dir), "--out", str(other), "--no-plots"]) == 0  # its own earlier rescore: replaced
    capsys.readouterr()

    assert not (other / "episodes.jsonl").exists() and not (other / "run.json").exists()  # no other run's log shadows it

    original = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    for source in (run_dir, run_dir / "report.json"):
        assert main(["--rescore", str(source), "--out", str(run_dir), "--no-plots", "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert "the run's own folder" in err and err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == original


def test_rescore_takes_the_folder_lock_of_its_out(run_dir, tmp_path, capsys):
    from gem_core.errors import InvalidArgument
    from gem_core.eval.episode_log import LOCK_FILENAME
    from gem_core.transport.folder_lock import lock_folder, release_folder

    out = tmp_path / "busy"
    held = lock_folder(out, LOCK_FILENAME, what="output folder", why="a run is writing", error=InvalidArgument)
    try:
        assert main(["--rescore", str(run_dir), "--out", str(out), "--no-plots"]) == 2
        assert "in use by" in capsys.readouterr().err
        assert not (out / "report.json").exists()
    finally:
        release_folder(out, LOCK_FILENAME, held)
    assert main(["--rescore", str(run_dir), "--out", str(out), "--no-plots"]) == 0
    assert not (out / LOCK_FILENAME).exists()
