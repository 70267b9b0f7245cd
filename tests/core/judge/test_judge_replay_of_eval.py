"""The README's judged-rewards flow end to end: `gem eval` on a judged env, then `gem replay` of that run's
episodes.jsonl re-judges it (same judge: nothing changes; another judge: every turn's reward moves)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gem_core.cli import main

pytest.importorskip("rich")
pytest.importorskip("matplotlib")

FIVES = '{"scores": {"correctness": 5, "completeness": 5, "clarity": 5}}'
TENS = '{"scores": {"correctness": 10, "completeness": 10, "clarity": 10}}'


def test_gem_replay_rejudges_the_episodes_gem_eval_wrote(judge_server, tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))
    from openai_test_server import OpenAITestServer

    judge = judge_server([{"kind": "reply", "content": FIVES}])
    out = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: "An answer.") as policy:
        assert main(["eval", "--model", "tiny", "--base-url", policy.base_url, "--env", "judge:Sample", "--episodes", "2",
                     "--judge-url", judge.url, "--judge-model", "fives", "--out", str(out), "--no-plots", "--no-progress"]) == 0
    capsys.readouterr()
    episodes = str(out / "episodes.jsonl")

    assert main(["replay", episodes]) == 2  # a judged env is re-judged only with a judge from the command line
    assert "--judge-url URL and --judge-model NAME" in capsys.readouterr().err

    assert main(["replay", episodes, "--judge-url", judge.url, "--judge-model", "fives"]) == 0
    assert "2 episodes replayed, 0 turns changed." in capsys.readouterr().out

    generous = judge_server([{"kind": "reply", "content": TENS}])
    assert main(["replay", episodes, "--judge-url", generous.url, "--judge-model", "tens"]) == 1
    out_text = capsys.readouterr().out
    assert out_text.count("reward +0.5 -> +1") == 2 and "2 episodes replayed, 2 turns changed." in out_text


def test_gem_eval_rescore_rejudges_with_the_judge_on_the_command_line(judge_server, tmp_path, capsys):
    import json

    sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))
    from openai_test_server import OpenAITestServer

    judge = judge_server([{"kind": "reply", "content": FIVES}])
    run = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: "An answer.") as policy:
        assert main(["eval", "--model", "tiny", "--base-url", policy.base_url, "--env", "judge:Sample", "--episodes", "2",
                     "--judge-url", judge.url, "--judge-model", "fives", "--out", str(run), "--no-plots", "--no-progress"]) == 0
    capsys.readouterr()

    def rescore(out: str, *judge_flags: str) -> int:
        return main(["eval", "--rescore", str(run), "--out", str(tmp_path / out), "--no-plots", *judge_flags])

    # without a judge, as a live run: refused, and nothing re-scored as failed
    assert rescore("none") == 2
    assert "judge:Sample is a judged env: give --judge-url URL and --judge-model NAME" in capsys.readouterr().err
    assert not (tmp_path / "none" / "report.json").exists()

    generous = judge_server([{"kind": "reply", "content": TENS}])
    assert rescore("tens", "--judge-url", generous.url, "--judge-model", "tens") == 0, capsys.readouterr().err
    episodes = json.loads((tmp_path / "tens" / "report.json").read_text())["envs"]["judge:Sample"]["episodes"]
    assert [(e["error"], e["rewards"]) for e in episodes] == [(None, [1.0]), (None, [1.0])]
    assert generous.stats()["requests"] >= 1

    # a judge that gives no verdict fails the re-scored episodes, and says so in the exit code
    assert rescore("dead", "--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "x", "--judge-retries", "0") == 1
    assert "2 of 2 episodes failed" in capsys.readouterr().err
