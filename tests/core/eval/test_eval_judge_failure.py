"""A judge that gives no verdict fails the episode under every backend (never a real-looking reward of 0)."""

from __future__ import annotations

import json

import pytest
from openai_test_server import OpenAITestServer

from gem_core.eval.cli import main

pytest.importorskip("openai")


def test_gem_eval_over_http_with_a_dead_judge_fails_the_episodes_not_scores_them_0(tmp_path, capsys):
    out = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: "Paris is the capital of France.") as server:
        code = main([
            "--model", "m", "--base-url", server.base_url, "--env", "judge:Sample", "--episodes", "2",
            "--no-plots", "--no-progress", "--concurrency", "1", "--out", str(out),
            "--judge-url", "http://127.0.0.1:1/v1", "--judge-model", "j", "--judge-timeout", "1", "--judge-retries", "0",
        ])
    assert code == 1  # failed episodes, as for a backend failure
    report = json.loads((out / "report.json").read_text())
    summary = report["envs"]["judge:Sample"] if "envs" in report else report
    text = json.dumps(summary)
    assert '"episodes_failed": 2' in text
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    errors = [e.get("error") for e in episodes if "seed" in e]
    assert len(errors) == 2 and all(err and err.startswith("env step failed: judge: ") for err in errors), errors


def test_one_rule_for_both_backends():
    from gem_core.eval import chat_backend, policy_backend, report

    assert report.step_error([{}, {"error": "judge: boom"}]) == "env step failed: judge: boom"
    assert report.step_error([{}, {"format_error": True}]) is None
    assert chat_backend.step_error is report.step_error and policy_backend.step_error is report.step_error
