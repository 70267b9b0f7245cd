"""The judge against a scripted OpenAI-compatible server on 127.0.0.1: verdicts, the cache, failures."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from gem_core.judge import Criterion, Judge, Rubric, VerdictCache

RUBRIC = Rubric((Criterion("correctness", "Agrees with the reference."), Criterion("clarity", "Clear.")), scale=(0, 10))
TASK, REFERENCE = "What is the capital of Australia?", "Canberra"


def make_judge(server, **kwargs) -> Judge:
    kwargs = {"timeout": 5.0, "max_retries": 0, **kwargs}
    return Judge(server.url if hasattr(server, "url") else server, "scripted-judge", **kwargs)


def test_judge_scores_a_right_answer_above_a_wrong_one_and_keeps_the_raw_verdict(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = make_judge(server)
    try:
        right = judge.judge(TASK, "It is Canberra.", rubric=RUBRIC, reference=REFERENCE)
        wrong = judge.judge(TASK, "It is Sydney.", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert right.error is None and wrong.error is None
    assert right.scores == {"correctness": 8, "clarity": 8} and right.reward == pytest.approx(0.8)
    assert wrong.reward == pytest.approx(0.2)
    assert json.loads(right.raw)["scores"] == right.scores
    assert right.to_info()["rubric_digest"] == RUBRIC.digest and right.to_info()["model"] == "scripted-judge"


def test_async_judging_from_another_event_loop(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = make_judge(server)

    async def both():
        return await asyncio.gather(
            judge.ajudge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE),
            judge.ajudge(TASK, "Perth", rubric=RUBRIC, reference=REFERENCE),
        )

    try:
        right, wrong = asyncio.run(both())
    finally:
        judge.close()
    assert (right.reward, wrong.reward) == (pytest.approx(0.8), pytest.approx(0.2))


def test_a_replay_with_the_same_cache_file_makes_no_judge_call(judge_server, tmp_path):
    server = judge_server([{"kind": "rule"}])
    cache = tmp_path / "verdicts.sqlite"
    first = make_judge(server, cache=str(cache))
    try:
        fresh = first.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
        again = first.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        first.close()
    assert not fresh.cached and again.cached and again.reward == fresh.reward and again.raw == fresh.raw
    assert server.stats()["requests"] == 1

    replay = make_judge(server, cache=str(cache))  # a later process, same file
    try:
        replayed = replay.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        replay.close()
    assert replayed.cached and replayed.reward == fresh.reward and replay.calls == 0
    assert server.stats()["requests"] == 1


def test_the_cache_key_covers_model_rubric_task_reference_and_answer(judge_server, tmp_path):
    server = judge_server([{"kind": "rule"}])
    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = make_judge(server, cache=cache)
    other_model = Judge(server.url, "another-judge", cache=cache, timeout=5.0, max_retries=0)
    heavier = Rubric((Criterion("correctness", "Agrees with the reference.", 3.0), Criterion("clarity", "Clear.")))
    try:
        judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
        variants = [
            other_model.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE),
            judge.judge(TASK, "Canberra", rubric=heavier, reference=REFERENCE),
            judge.judge(TASK + " ", "Canberra", rubric=RUBRIC, reference=REFERENCE),
            judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE + "."),
            judge.judge(TASK, "Canberra.", rubric=RUBRIC, reference=REFERENCE),
        ]
    finally:
        judge.close()
        other_model.close()
    assert not any(v.cached for v in variants)
    assert server.stats()["requests"] == 6 and len(cache) == 6


def test_a_tampered_cache_entry_is_judged_again(judge_server, tmp_path):
    import sqlite3

    server = judge_server([{"kind": "rule"}])
    path = tmp_path / "v.sqlite"
    judge = make_judge(server, cache=str(path))
    try:
        judge.judge(TASK, "Sydney", rubric=RUBRIC, reference=REFERENCE)
        with sqlite3.connect(path) as db:
            db.execute("UPDATE verdicts SET reply = ?", (json.dumps({"scores": {"correctness": 99, "clarity": 99}}),))
        again = judge.judge(TASK, "Sydney", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert not again.cached and again.reward == pytest.approx(0.2)


def test_a_cache_spoiled_after_the_start_is_a_miss_and_the_judge_is_asked(judge_server, tmp_path, caplog):
    """A cache file another process replaces mid-run costs judge calls, never rewards."""
    import sqlite3

    server = judge_server([{"kind": "rule"}])
    path = tmp_path / "v.sqlite"
    judge = make_judge(server, cache=str(path))
    try:
        first = judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
        with sqlite3.connect(path) as db:
            db.execute("DROP TABLE verdicts")
            db.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, foo TEXT)")
        db.close()
        again = [judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE) for _ in range(2)]
    finally:
        judge.close()
    assert first.error is None and all(v.error is None and not v.cached and v.reward == first.reward for v in again)
    assert server.stats()["requests"] == 3
    warnings = [r.getMessage() for r in caplog.records if "no such column" in r.getMessage()]
    assert len(warnings) == 1 and str(path) in warnings[0]


def test_an_unreachable_judge_gives_zero_with_an_error(judge_server):
    server = judge_server([{"kind": "rule"}])
    url = server.url
    server.stop()
    judge = make_judge(url, max_retries=1)
    try:
        verdict = judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert verdict.reward == 0.0 and "connection refused" in verdict.error and "--judge-url" in verdict.error


def test_a_slow_judge_times_out_with_zero_and_an_error(judge_server):
    server = judge_server([{"kind": "delay", "seconds": 30, "then": {"kind": "rule"}}])
    judge = make_judge(server, timeout=0.5, max_retries=0)
    try:
        verdict = judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert verdict.reward == 0.0 and "timed out" in verdict.error


def test_rate_limiting_is_retried_then_reported(judge_server):
    recovering = judge_server([{"kind": "status", "code": 429, "retry_after": "0"}, {"kind": "rule"}])
    always = judge_server([{"kind": "status", "code": 429, "retry_after": "0"}])
    judges = [make_judge(recovering, max_retries=2), make_judge(always, max_retries=2)]
    try:
        recovered = judges[0].judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
        refused = judges[1].judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        for judge in judges:
            judge.close()
    assert recovered.error is None and recovered.reward == pytest.approx(0.8)
    assert refused.reward == 0.0 and "HTTP 429" in refused.error
    assert always.stats()["requests"] == 3


def test_a_long_retry_after_is_cut_by_the_deadline(judge_server):
    server = judge_server([{"kind": "status", "code": 429, "retry_after": "50"}])
    judge = make_judge(server, max_retries=3, deadline=1.0)
    try:
        verdict = judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert verdict.reward == 0.0 and "no verdict within 1 s" in verdict.error


@pytest.mark.parametrize(
    "step, expected",
    [
        ({"kind": "reply", "content": "Great answer, 10/10!"}, "not a JSON object"),
        ({"kind": "reply", "content": '{"scores": {"correctness": 11, "clarity": 5}}'}, "not an integer from 0 to 10"),
        ({"kind": "reply", "content": '{"scores": {"correctness": 8}}'}, "missing ['clarity']"),
        ({"kind": "reply", "content": '{"scores": {"correctness": 1, "clarity": 1}} {"scores": {"correctness": 10, "clarity": 10}}'}, "not one JSON object"),
        ({"kind": "reply", "content": '{"scores": {"correctness": true, "clarity": 5}}'}, "not an integer"),
        ({"kind": "reply", "content": "{" * 5000 + "}" * 5000}, "nests deeper"),
        ({"kind": "reply", "content": '{"scores": {"correctness": 5, "clarity": 5}, "reward": 1.0}'}, "unknown key"),
        ({"kind": "body", "body": "<html>busy</html>"}, "not a chat completion"),
        ({"kind": "body", "body": "[" * 100_000 + "]" * 100_000}, "not a chat completion"),
    ],
)
def test_garbage_from_the_judge_gives_zero_with_an_error(judge_server, step, expected):
    server = judge_server([step])
    judge = make_judge(server)
    try:
        verdict = judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert verdict.reward == 0.0 and expected in verdict.error
    assert len(judge.cache) == 0  # failures are not cached


def test_requests_in_flight_stay_under_the_cap(judge_server):
    server = judge_server([{"kind": "delay", "seconds": 0.3, "then": {"kind": "rule"}}])
    judge = make_judge(server, max_in_flight=2)
    verdicts = []
    threads = [
        threading.Thread(target=lambda i=i: verdicts.append(judge.judge(TASK, f"answer {i}", rubric=RUBRIC, reference=REFERENCE)))
        for i in range(6)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        judge.close()
    assert len(verdicts) == 6 and all(v.error is None for v in verdicts)
    stats = server.stats()
    assert stats["requests"] == 6 and stats["max_in_flight"] <= 2


def test_a_huge_answer_is_cut_before_it_is_sent(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = make_judge(server, max_text_chars=1000)
    try:
        verdict = judge.judge(TASK, "x" * 500_000 + " Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert verdict.truncated and verdict.error is None and verdict.reward == pytest.approx(0.2)


def test_a_judge_pickles_without_its_connections(judge_server, tmp_path):
    import pickle

    server = judge_server([{"kind": "rule"}])
    judge = make_judge(server, cache=str(tmp_path / "v.sqlite"))
    judge.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    copy = pickle.loads(pickle.dumps(judge))
    try:
        again = copy.judge(TASK, "Canberra", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
        copy.close()
    assert copy.base_url == judge.base_url and again.cached


def test_judge_refuses_a_url_that_is_not_http():
    with pytest.raises(ValueError, match="http:// or https://"):
        Judge("file:///etc/passwd", "m")


def test_an_answer_with_lone_surrogates_and_control_characters_is_judged(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = make_judge(server)
    try:
        verdict = judge.judge(TASK, "Canberra \ud800\x00\x1b[2J", rubric=RUBRIC, reference=REFERENCE)
    finally:
        judge.close()
    assert verdict.error is None and verdict.reward == pytest.approx(0.8)
