"""gem_core/eval/chat_backend.py through evaluate(): a real OpenAI-compatible server on loopback,
healthy, slow and failing."""

from __future__ import annotations

import json
import math

import pytest
from openai_test_server import OpenAITestServer, TinyModelResponder

from gem_core.eval import evaluate

EASY = "game:GuessTheNumber-v0-easy"


def _assistant_turns(record) -> int:
    return sum(m["role"] == "assistant" for m in record.transcript)


def test_tiny_model_behind_http_plays_both_envs_and_the_report_matches_the_server(tiny_model, tiny_tokenizer, tmp_path):
    with OpenAITestServer(TinyModelResponder(tiny_model, tiny_tokenizer)) as server:
        report = evaluate(
            [EASY, "game:Wordle-v0"], model="tiny", base_url=server.base_url, episodes=2, max_turns=3,
            max_new_tokens=6, concurrency=4, progress=False, out_dir=str(tmp_path),
        )
        requests = server.stats.requests
    assert report.backend == "openai-chat" and report.model == "tiny" and not report.interrupted
    records = [r for env in report.env_ids for r in report.episodes[env]]
    assert len(records) == 4 and not any(r.failed for r in records)
    assert sum(r.turns for r in records) == requests  # one chat request per turn
    for record in records:
        assert 1 <= record.turns <= 3 and record.turns == _assistant_turns(record)
        assert record.prompt_tokens > 0 and record.completion_tokens > 0
        assert record.transcript[0]["role"] == "user" and record.transcript[-1]["role"] == "user"
    saved = json.loads((tmp_path / "report.json").read_text())
    assert set(saved["envs"]) == {EASY, "game:Wordle-v0"}


def test_a_scripted_binary_search_through_http_always_wins(binary_search):
    def respond(messages):
        return binary_search("\n".join(m["content"] for m in messages))

    with OpenAITestServer(respond=respond) as server:
        report = evaluate(
            EASY, model="scripted", base_url=server.base_url, episodes=6, seed=3, progress=False,
            backend_options={"api_key": "sk-secret-123"},
        )
        bodies = server.stats.bodies
    summary = report.summary(EASY)
    assert summary.success_rate == 1.0 and summary.mean_return == 1.0 and summary.format_error_rate == 0.0
    assert summary.mean_turns <= math.ceil(math.log2(10))
    assert [r.seed for r in report.episodes[EASY]] == [3, 4, 5, 6, 7, 8]
    assert all(r.transcript[-1]["content"].startswith("Correct!") for r in report.episodes[EASY])
    assert all(b["model"] == "scripted" for b in bodies)
    assert report.config["backend_settings"]["base_url"] == server.base_url
    assert "sk-secret-123" not in json.dumps(report.to_dict())


@pytest.mark.parametrize(
    ("fault", "message", "options"),
    [
        ("error", "HTTP 500", {}),
        ("timeout", "timed out", {"timeout": 0.2}),
        ("garbage", "not a chat completion", {}),
    ],
)
def test_a_failing_server_fails_episodes_not_the_run_and_keeps_completed_ones(binary_search, tmp_path, fault, message, options):
    def respond(messages):
        return binary_search("\n".join(m["content"] for m in messages))

    with OpenAITestServer(respond=respond, fault=fault, healthy_requests=4) as server:
        report = evaluate(
            EASY, model="flaky", base_url=server.base_url, episodes=5, max_turns=2, concurrency=1,
            backend_options={"max_retries": 1, **options}, progress=False, out_dir=str(tmp_path),
        )
        faults = server.stats.faults
    records = report.episodes[EASY]
    completed = [r for r in records if not r.failed]
    failed = [r for r in records if r.failed]
    assert len(records) == 5 and faults >= 1
    assert 2 <= len(completed) <= 4 and failed
    assert all(message in r.error for r in failed)
    assert all(r.turns == _assistant_turns(r) and r.transcript[-1]["role"] == "user" for r in completed)
    # A failed episode keeps what was played before the failure (its observation, no reply to it).
    assert all(r.transcript[-1]["role"] == "user" and r.turns == _assistant_turns(r) for r in failed)
    summary = report.summary(EASY)
    assert (summary.episodes_completed, summary.episodes_failed) == (len(completed), len(failed))
    assert summary.success_rate == pytest.approx(sum(r.success for r in completed) / len(completed))
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["envs"][EASY]["summary"]["episodes_failed"] == len(failed)
    assert [e["error"] is not None for e in saved["envs"][EASY]["episodes"]] == [r.failed for r in records]
