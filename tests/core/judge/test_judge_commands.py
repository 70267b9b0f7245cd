"""``gem eval --judge-url/--judge-model`` and ``gem replay`` re-judging, against scripted loopback servers."""

from __future__ import annotations

import json

import pytest

from gem_core.cli import main
from gem_core.judge import Judge

pytest.importorskip("rich")
pytest.importorskip("matplotlib")

TEN = '{"scores": {"correctness": 10, "completeness": 10, "clarity": 10}, "reason": "x"}'


@pytest.fixture
def episodes_file(judge_server, tmp_path, tiny_tokenizer, record_judged_episodes):
    """Three judge:Sample episodes judged by the rule judge, written as trajectories; and the cache used."""
    server = judge_server([{"kind": "rule"}])
    cache = str(tmp_path / "verdicts.sqlite")
    judge = Judge(server.url, "rule-judge", timeout=5.0, max_retries=0, cache=cache)
    try:
        path = record_judged_episodes(judge, tiny_tokenizer, "Blue light scatters most.", tmp_path / "episodes.jsonl")
    finally:
        judge.close()
    return path, server, cache


def test_gem_replay_with_the_same_judge_and_cache_changes_nothing_and_calls_nobody(episodes_file, capsys):
    path, server, cache = episodes_file
    calls = server.stats()["requests"]
    code = main(["replay", str(path), "--judge-url", server.url, "--judge-model", "rule-judge", "--judge-cache", cache])
    assert code == 0, capsys.readouterr()
    assert "3 episodes replayed, 0 turns changed" in capsys.readouterr().out
    assert server.stats()["requests"] == calls


def test_gem_replay_rejudges_with_another_judge(episodes_file, judge_server, capsys):
    path, _, cache = episodes_file
    generous = judge_server([{"kind": "reply", "content": TEN}])
    code = main(["replay", str(path), "--judge-url", generous.url, "--judge-model", "generous", "--judge-cache", cache])
    out = capsys.readouterr().out
    assert code == 1 and "reward +0.2 -> +1" in out and "3 turns changed" in out
    assert generous.stats()["requests"] >= 1


def test_gem_replay_of_a_judged_env_without_a_judge_says_what_to_give(episodes_file, capsys):
    path, _, _ = episodes_file
    assert main(["replay", str(path)]) == 2
    assert "--judge-url URL and --judge-model NAME" in capsys.readouterr().err


def test_a_trajectory_file_cannot_choose_the_judge(episodes_file, judge_server, capsys):
    path, server, _ = episodes_file
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        record["env_kwargs"] = {"judge_url": "http://attacker.invalid/v1", "judge_model": "x"}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["replay", str(path), "--judge-url", server.url, "--judge-model", "rule-judge"]) == 2
    assert "env_kwargs['judge_url'] is not a plain setting a file may choose" in capsys.readouterr().err


def test_gem_eval_judges_a_judged_env_with_the_judge_on_the_command_line(judge_server, tmp_path, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))
    from openai_test_server import OpenAITestServer

    judge = judge_server([{"kind": "reply", "content": '{"scores": {"correctness": 5, "completeness": 5, "clarity": 5}}'}])
    out = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: "An answer.") as policy:
        code = main([
            "eval", "--model", "tiny", "--base-url", policy.base_url, "--env", "judge:Sample", "--episodes", "2",
            "--judge-url", judge.url, "--judge-model", "fives", "--out", str(out), "--no-plots", "--no-progress",
        ])
    assert code == 0, capsys.readouterr().err
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if '"rewards"' in line]
    assert sorted(r for e in episodes for r in e["rewards"]) == [0.5, 0.5] and judge.stats()["requests"] >= 1
    assert judge.url not in (out / "run.json").read_text()  # a run folder never names the judge's URL


def test_gem_eval_refuses_a_judged_env_without_a_judge_and_a_judge_without_a_judged_env(capsys):
    assert main(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", "judge:Sample", "--out", "/nonexistent/x"]) == 2
    assert "judge:Sample is a judged env: give --judge-url" in capsys.readouterr().err
    assert main(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", "game:Wordle-v0",
                 "--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "j", "--out", "/nonexistent/y"]) == 2
    assert "no --env is a judged env" in capsys.readouterr().err
    assert main(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", "judge:Sample",
                 "--judge-url", "http://127.0.0.1:9/v1", "--out", "/nonexistent/z"]) == 2
    assert "give both --judge-url URL and --judge-model NAME" in capsys.readouterr().err
