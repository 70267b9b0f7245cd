"""Field bugs of ``gem eval``: re-scoring, resuming and the files a run reads back.

Runs are made without a model: a scripted backend steps the env itself, or the loopback OpenAI test server
answers with a fixed text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from openai_test_server import OpenAITestServer
from scripted_backend import OneStepBackend

from gem_core import registry
from gem_core.env import Env, episode_success
from gem_core.errors import InvalidArgument, MalformedFile
from gem_core.eval import evaluate
from gem_core.eval.cli import main
from gem_core.eval.config import EvalConfig
from gem_core.eval.report import EpisodeRecord, EvalReport
from gem_core.eval.rescore import load_run, rescore_report
from gem_core.eval.resume import ResumeMismatch

GUESS = "game:GuessTheNumber-v0"  # numbers 1..20, registered limit 8 turns


class SweepBackend:
    """Plays each episode by stepping the env with ``move(turn)`` until it ends, recording what a backend records."""

    kind = "scripted"
    model_name = "scripted"
    settings: dict = {}

    def __init__(self, move=lambda turn: f"\\boxed{{{turn + 1}}}"):  # a linear sweep: 1, 2, 3, ...
        self.move = move

    async def run_episode(self, env, env_id, seed, config, record):
        observation, _ = await env.areset(seed=seed)
        record.transcript = [{"role": "user", "content": observation}]
        infos = []
        for turn in range(200):
            action = self.move(turn)
            record.transcript.append({"role": "assistant", "content": action})
            observation, reward, terminated, truncated, info = await env.astep(action)
            record.rewards.append(reward)
            infos.append(info)
            record.transcript.append({"role": "user", "content": observation})
            if terminated or truncated:
                record.terminated, record.truncated = terminated, truncated
                break
        record.success = episode_success(infos, sum(record.rewards), record.terminated)

    async def aclose(self):
        pass


def _run(out, backend=None, env_ids=(GUESS,), **settings):
    settings = {"episodes": 2, "progress": False, "plots": False, **settings}
    return evaluate(list(env_ids), backend=backend or OneStepBackend(), out_dir=str(out), **settings)


# 1. --rescore with --max-turns above the env's registered limit


def test_rescore_keeps_a_max_turns_above_the_registered_limit(tmp_path):
    """Before: the rescore built the env with its registered limit (8 turns) and wrapped a TurnLimit of 40 around
    it, so episodes won on turn 10-18 of a --max-turns 40 run were cut at turn 8 and re-scored as losses
    ("2 changed") although nothing in the grader changed."""
    report = _run(tmp_path / "run", SweepBackend(), max_turns=40)
    episodes = report.episodes[GUESS]
    assert all(r.success and r.turns > 8 for r in episodes), [(r.turns, r.success) for r in episodes]
    rescored = rescore_report(load_run(tmp_path / "run"))
    assert rescored.rescore["changed"] == []
    assert [r.success for r in rescored.episodes[GUESS]] == [True, True]


# 2. a judged run resumed with another judge


def _judge(model):
    from gem_core.judge.client import Judge

    return Judge("http://127.0.0.1:1/v1", model, timeout=1.0, max_retries=0)


def _judged_run(out, model, rubric=None, **settings):
    judge = _judge(model)
    try:
        return _run(out, OneStepBackend(), env_ids=("judge:Sample",),
                    env_overrides=lambda env_id: {"judge": judge, **({"rubric": rubric} if rubric else {})}, **settings)
    finally:
        judge.close()


def _cut_last_episode(out):
    path = Path(out) / "episodes.jsonl"
    lines = path.read_text().splitlines(True)
    path.write_text("".join(lines[:-1]))


def test_a_judged_run_resumed_with_another_judge_or_rubric_is_refused(tmp_path):
    """Before: run.json held nothing about the judge, so a resume with another judge model (or rubric) went on and
    the report mixed the verdicts of two judges."""
    out = tmp_path / "run"
    _judged_run(out, "lenient")
    assert json.loads((out / "run.json").read_text())["config"]["judges"] == {"judge:Sample": {"model": "lenient", "rubric": None}}
    _cut_last_episode(out)
    with pytest.raises(ResumeMismatch) as caught:
        _judged_run(out, "strict", resume=True)
    assert caught.value.setting == "judge_model" and "lenient" in str(caught.value)
    with pytest.raises(ResumeMismatch) as caught:
        _judged_run(out, "lenient", {"criteria": [{"name": "brevity", "description": "short"}]}, resume=True)
    assert caught.value.setting == "judge_rubric"
    assert _judged_run(out, "lenient", resume=True).episodes_finished == 2  # the same judge goes on


def test_gem_eval_resume_with_another_judge_names_the_flag(tmp_path, capsys):
    """Before: `gem eval --resume` with another --judge-model exited 0 and mixed the two judges' verdicts."""
    out = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: "Paris.") as server:
        common = ["--base-url", server.base_url, "--no-plots", "--no-progress", "--judge-url", "http://127.0.0.1:1/v1",
                  "--judge-timeout", "1", "--judge-retries", "0"]
        main(["--model", "m", "--env", "judge:Sample", "--episodes", "2", "--out", str(out), *common, "--judge-model", "lenient"])
        _cut_last_episode(out)
        capsys.readouterr()
        assert main(["--resume", str(out), *common, "--judge-model", "strict"]) == 2
    err = capsys.readouterr().err
    assert "--judge-model" in err and "lenient" in err and "strict" in err


# 3. --resume and the unreadable lines of episodes.jsonl


def test_resume_moves_a_damaged_line_aside_and_says_so(tmp_path, capsys):
    """Before: --resume deleted every unparsable line anywhere in episodes.jsonl (here a whole record in the middle
    with prompt_tokens -1) without a word; only a last line a kill cut short is documented as dropped."""
    out = tmp_path / "run"
    _run(out, episodes=4)
    path = out / "episodes.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["prompt_tokens"] = -1
    damaged = json.dumps(record)
    path.write_text("\n".join([lines[0], damaged, lines[2]]) + "\n" + lines[3][:20])  # and a cut-short last line
    capsys.readouterr()
    report = _run(out, episodes=4, resume=True)
    assert report.episodes_finished == 4
    err = capsys.readouterr().err
    assert "line 2" in err and "episodes.jsonl.damaged" in err
    assert (out / "episodes.jsonl.damaged").read_text() == damaged + "\n"  # the cut-short line is not kept
    assert damaged not in path.read_text()


def test_resume_drops_a_cut_short_last_line_silently(tmp_path, capsys):
    """The documented case stays as it was: a final line without its newline is dropped, nothing moved aside."""
    out = tmp_path / "run"
    _run(out, episodes=3)
    path = out / "episodes.jsonl"
    text = path.read_text()
    path.write_text(text[: len(text) - 30])
    capsys.readouterr()
    assert _run(out, episodes=3, resume=True).episodes_finished == 3
    assert "damaged" not in capsys.readouterr().err and not (out / "episodes.jsonl.damaged").exists()


# 4. --rescore and non-finite rewards


class _Graded(Env):
    """One step; pays GRADER[seed] (default 1.0)."""

    GRADER: dict = {}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_ = seed
        return "say anything", {}

    def step(self, action):
        return "done", self.GRADER.get(self.seed_, 1.0), True, False, {}

    def sample_random_action(self):
        return "x"


@pytest.mark.parametrize("rewards", [float("nan"), float("inf")])
def test_rescore_fails_an_episode_with_a_non_finite_reward_as_a_live_run(tmp_path, monkeypatch, capsys, rewards):
    """Before: a grader that now paid NaN or inf for one episode made the whole rescore fail on writing its report
    (a bare ValueError "Out of range float values are not JSON compliant", exit 1, no report)."""
    env_id = "test:Graded-v0"
    monkeypatch.setitem(registry._REGISTRY, env_id, registry.EnvSpec(env_id, _Graded))
    monkeypatch.setattr(_Graded, "GRADER", {})
    _run(tmp_path / "run", SweepBackend(lambda turn: "x"), env_ids=(env_id,), episodes=3)
    monkeypatch.setattr(_Graded, "GRADER", {1: rewards})
    rescored = rescore_report(load_run(tmp_path / "run"))
    failed = rescored.failed_episodes()
    assert [r.seed for r in failed] == [1] and "not finite" in failed[0].error
    rescored.save(tmp_path / "report.json")  # JSON holds it
    capsys.readouterr()
    assert main(["--rescore", str(tmp_path / "run"), "--no-plots"]) == 1
    err = capsys.readouterr().err
    assert "not finite" in err and "JSON compliant" not in err
    assert (tmp_path / "run" / "rescored" / "report.json").is_file()


# 5. --seed with --episodes past the largest seed


def test_a_seed_range_past_the_largest_seed_is_refused_up_front(tmp_path, capsys):
    """Before: only --seed was bounded, so --seed 2**63-2 --episodes 3 ran, its third episode failed at reset
    (seed 2**63 is past the largest seed) and the run exited 1; EvalConfig accepted it too."""
    with pytest.raises(InvalidArgument, match="seed") as caught:
        EvalConfig(env_ids=[GUESS], episodes=3, seed=2**63 - 2)
    assert "episodes" in str(caught.value)
    EvalConfig(env_ids=[GUESS], episodes=2, seed=2**63 - 2)  # the last seed is the largest one: fine
    assert main(["--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--env", GUESS, "--episodes", "3",
                 "--seed", str(2**63 - 2), "--out", str(tmp_path / "o"), "--no-plots", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "--episodes" in err
    assert not (tmp_path / "o").exists()


# 6. the default output folder of runs started in the same second


def test_runs_started_in_the_same_second_get_their_own_default_folders(tmp_path, monkeypatch, capsys):
    """Before: the default --out was gem-eval/<model>-<second>, so a second run started in the same second found
    the first one's folder and was refused (exit 2: "already holds a run" or "in use by another process")."""
    from gem_core.eval import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_default_out_dir", lambda model: Path("gem-eval") / "m-20260101-000000")
    with OpenAITestServer(respond=lambda messages: "\\boxed{5}") as server:
        argv = ["--model", "m", "--base-url", server.base_url, "--env", GUESS, "--episodes", "1", "--max-turns", "1",
                "--no-plots", "--no-progress"]
        assert [main(argv), main(argv), main(argv)] == [0, 0, 0], capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "gem-eval").iterdir()) == [
        "m-20260101-000000", "m-20260101-000000-2", "m-20260101-000000-3"]


# 7. a record whose finite rewards sum past the largest float


def test_a_record_whose_rewards_sum_to_inf_is_malformed(tmp_path):
    """Before: [1e308, 1e308] passed EpisodeRecord.from_dict (each reward is finite), and a resume then failed with
    a bare ValueError from json.dumps ("Out of range float values are not JSON compliant")."""
    with pytest.raises(MalformedFile, match="rewards"):
        EpisodeRecord.from_dict({"env_id": GUESS, "seed": 0, "rewards": [1e308, 1e308]})
    out = tmp_path / "run"
    _run(out, episodes=3)
    path = out / "episodes.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["rewards"] = [1e308, 1e308]
    path.write_text(json.dumps(record) + "\n" + lines[1] + "\n")
    report = _run(out, episodes=3, resume=True)
    assert report.episodes_finished == 3
    assert all(math.isfinite(r.episode_return) for r in report.episodes[GUESS])


# 8. a report.json whose resumed_at or interrupted has the wrong type


@pytest.mark.parametrize(("field", "value"), [("resumed_at", None), ("resumed_at", 5), ("resumed_at", [1]), ("interrupted", "yes")])
def test_a_report_with_a_mistyped_resumed_at_or_interrupted_is_malformed(tmp_path, capsys, field, value):
    """Before: "resumed_at": null made EvalReport.load raise a bare TypeError ('NoneType' object is not iterable),
    and --compare and --rescore ended with exit 1 and that TypeError; "interrupted": "yes" was taken as true."""
    report = _run(tmp_path / "run")
    data = report.to_dict()
    data[field] = value
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "report.json").write_text(json.dumps(data))
    with pytest.raises(MalformedFile, match=field):
        EvalReport.load(tmp_path / "b")
    capsys.readouterr()
    assert main(["--compare", str(tmp_path / "run"), str(tmp_path / "b")]) == 2
    assert main(["--rescore", str(tmp_path / "b" / "report.json"), "--out", str(tmp_path / "c"), "--no-plots"]) == 2
    assert field in capsys.readouterr().err
