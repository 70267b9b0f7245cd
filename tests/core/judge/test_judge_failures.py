"""A judge failure is never a real-looking reward: replay reports it as a failure, messages never carry the
key, and a judge that can never work is refused at construction, naming the argument."""

from __future__ import annotations

import math

import pytest

from gem_core.cli import main
from gem_core.judge import Judge, Rubric

pytest.importorskip("rich")

DEAD = "http://127.0.0.1:1/v1"
KEY = "sk-DISTINCTIVE-key-0451"
GOOD = '{"scores": {"correctness": 8, "completeness": 6, "clarity": 9}, "reason": "ok"}'


@pytest.fixture
def judged_file(judge_server, tmp_path, tiny_tokenizer, record_judged_episodes):
    def make(url: str | None = None):
        server = judge_server([{"kind": "rule"}])
        judge = Judge(url or server.url, "rule-judge", timeout=1.0, max_retries=0)
        try:
            return record_judged_episodes(judge, tiny_tokenizer, "Blue light scatters most.", tmp_path / "episodes.jsonl")
        finally:
            judge.close()

    return make


# -- 2: gem replay --------------------------------------------------------------------------------


def test_replay_against_a_dead_judge_reports_judge_failures_not_reward_changes(judged_file, capsys):
    path = judged_file()
    code = main(["replay", str(path), "--judge-url", DEAD, "--judge-model", "j", "--judge-timeout", "1", "--judge-retries", "0"])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "-> +0" not in out and "turns changed" in out
    assert "episode 0 turn 0: judge/env failed (stored reward +0.2): judge: cannot connect to http://127.0.0.1:1/v1" in out
    assert "3 episodes replayed, 0 turns changed, 3 turns failed (judge or env errors; no reward compared)." in out


def test_replay_of_stored_failures_against_a_dead_judge_is_not_success(judged_file, capsys):
    path = judged_file(DEAD)  # every stored reward is a judge failure's 0
    code = main(["replay", str(path), "--judge-url", DEAD, "--judge-model", "j", "--judge-timeout", "1", "--judge-retries", "0"])
    out = capsys.readouterr().out
    assert code == 3 and "3 turns failed" in out, out


# -- 3: the key never appears in a message ---------------------------------------------------------


@pytest.fixture
def echo_401():
    """A judge that answers 401 with the Authorization header it received in the body."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = ('{"error": {"message": "bad key ' + str(self.headers.get("Authorization")) + '"}}').encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_judge_echoing_the_key_in_its_401_never_puts_it_in_info_or_logs(echo_401, caplog, capsys):
    import gem_core

    judge = Judge(echo_401, "j", api_key=KEY, timeout=2.0, max_retries=0)
    try:
        verdict = judge.judge("task", "answer")
        env = gem_core.make("judge:Sample", judge=judge)
        env.reset(seed=0)
        info = env.step("answer")[4]
    finally:
        judge.close()
    assert verdict.error and "401" in verdict.error and "Bearer ***" in verdict.error
    captured = capsys.readouterr()
    for text in (repr(verdict.to_info()), repr(info), caplog.text, captured.err, captured.out):
        assert KEY not in text


def test_a_key_in_the_url_user_info_is_never_printed(capsys):
    judge = Judge(f"http://user:{KEY}@127.0.0.1:1/v1", "j", timeout=1.0, max_retries=0)
    try:
        verdict = judge.judge("task", "answer")
    finally:
        judge.close()
    assert verdict.error and "cannot connect to http://user:***@127.0.0.1:1/v1" in verdict.error
    assert KEY not in repr(verdict) and KEY not in repr(judge)


# -- 4, 6: refused at construction, naming the argument --------------------------------------------


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(timeout="5"), "Judge timeout='5' (--judge-timeout): must be a finite number of seconds > 0"),
        (dict(timeout=float("nan")), "Judge timeout=nan (--judge-timeout): must be a finite number of seconds > 0"),
        (dict(timeout=float("inf")), "Judge timeout=inf (--judge-timeout): must be a finite number of seconds > 0"),
        (dict(deadline=float("nan")), "Judge deadline=nan: must be None or a finite number of seconds > 0"),
        (dict(max_retries=1.7), "Judge max_retries=1.7 (--judge-retries): must be a whole number >= 0"),
        (dict(max_in_flight=2.9), "Judge max_in_flight=2.9 (--judge-max-in-flight): must be a whole number >= 1"),
        (dict(max_tokens=True), "Judge max_tokens=True: must be a whole number >= 1"),
        (dict(max_text_chars=0), "Judge max_text_chars=0: must be a whole number >= 1"),
        (dict(temperature=float("nan")), "Judge temperature=nan: must be a finite number >= 0"),
        (dict(temperature="hot"), "Judge temperature='hot': must be a finite number >= 0"),
        (dict(prompt="x"), "Judge prompt='x': must be a callable (rubric, task, answer, reference, nonce) -> messages"),
        (dict(cache=123), "Judge cache=123 (--judge-cache): must be a VerdictCache, a SQLite file path or None"),
        # past the bounds a blocking wait overflows the clock ("timestamp out of range") instead of giving a verdict
        (dict(deadline=1e10), "Judge deadline=10000000000.0: must be None or a finite number of seconds > 0, at most 604800"),
        (dict(timeout=1e8), "Judge timeout=100000000.0 (--judge-timeout): must be a finite number of seconds > 0, at most 86400"),
        (dict(max_retries=1000), "Judge max_retries=1000 (--judge-retries): must be a whole number >= 0, at most 100"),
        (dict(max_in_flight=10**6), "Judge max_in_flight=1000000 (--judge-max-in-flight): must be a whole number >= 1, at most 10000"),
    ],
)
def test_bad_judge_options_are_refused_naming_the_argument(kwargs, fragment):
    with pytest.raises(ValueError) as caught:
        Judge(DEAD, "j", **kwargs)
    assert fragment in str(caught.value)


def test_the_longest_timeouts_and_retries_give_a_deadline_within_its_bound():
    judge = Judge(DEAD, "j", timeout=86_400.0, max_retries=100)
    try:
        assert judge.deadline == 604_800.0
    finally:
        judge.close()


@pytest.mark.parametrize("which", ["directory", "not sqlite", "missing folder"])
def test_a_cache_that_cannot_work_is_refused_at_construction(tmp_path, which):
    path = {"directory": tmp_path, "not sqlite": tmp_path / "notes.txt", "missing folder": tmp_path / "nope" / "v.sqlite"}[which]
    if which == "not sqlite":
        path.write_text("these are not verdicts\n" * 100)
    with pytest.raises(OSError) as caught:
        Judge(DEAD, "j", cache=str(path))
    message = str(caught.value)
    assert f"--judge-cache {path}: cannot use it as the judge's verdict cache" in message and "give a writable SQLite file" in message
    assert not (tmp_path / "nope").exists()


def _cache_of_another_schema(path) -> None:
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, foo TEXT)")
    db.close()


def _cache_with_corrupt_pages(path) -> None:
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, model TEXT NOT NULL, reply TEXT NOT NULL)")
        db.executemany("INSERT INTO verdicts VALUES (?, ?, ?)", [(str(i), "m", "x" * 500) for i in range(200)])
    db.close()
    data = path.read_bytes()
    path.write_bytes(data[:4096] + b"\xaa" * (len(data) - 4096))  # the header page stays, the pages after it do not


@pytest.mark.parametrize(("spoil", "reason"), [(_cache_of_another_schema, "no such column"), (_cache_with_corrupt_pages, "malformed")],
                         ids=["another verdicts table", "corrupt pages"])
def test_a_sqlite_cache_that_is_no_verdict_cache_is_refused_at_construction(tmp_path, spoil, reason):
    """Such a file opens as SQLite, but every lookup would fail: each judgement a reward of 0, the judge never asked."""
    path = tmp_path / "v.sqlite"
    spoil(path)
    with pytest.raises(OSError) as caught:
        Judge(DEAD, "j", cache=str(path))
    message = str(caught.value)
    assert f"--judge-cache {path}: cannot use it as the judge's verdict cache" in message and reason in message


def test_gem_eval_refuses_a_bad_judge_cache_and_an_infinite_timeout_at_start(tmp_path, capsys):
    from gem_core.eval.cli import main as eval_main

    base = ["--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--env", "judge:Sample", "--no-progress", "--out", str(tmp_path / "r"),
            "--judge-url", DEAD, "--judge-model", "j"]
    assert eval_main([*base, "--judge-cache", str(tmp_path)]) == 2
    assert "--judge-cache" in capsys.readouterr().err
    assert eval_main([*base, "--judge-timeout", "inf"]) == 2
    err = capsys.readouterr().err
    assert "--judge-timeout" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


# -- 5: a rubric whose total weight overflows ------------------------------------------------------


def test_a_rubric_whose_weights_sum_to_inf_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "rubric.json"
    path.write_text('{"criteria": [' + ", ".join(f'{{"name": "c{i}", "description": "d", "weight": 1e308}}' for i in range(3)) + "]}")
    with pytest.raises(ValueError) as caught:
        Rubric.load(path)
    assert f"Rubric file {path}: the criteria's total weight must be finite" in str(caught.value)


# -- 7: diagnostics --------------------------------------------------------------------------------


def test_a_verdict_with_a_duplicate_key_is_malformed(judge_server):
    twice = '{"scores": {"correctness": 0, "correctness": 10, "completeness": 6, "clarity": 9}, "reason": "ok"}'
    server = judge_server([{"kind": "reply", "content": twice}])
    judge = Judge(server.url, "j", timeout=2.0, max_retries=0)
    try:
        verdict = judge.judge("task", "answer")
    finally:
        judge.close()
    assert verdict.reward == 0.0 and not math.isnan(verdict.reward)
    assert verdict.error and "malformed verdict" in verdict.error and "duplicate key 'correctness'" in verdict.error


def test_a_reply_over_the_cap_says_it_was_too_large_not_cannot_connect(judge_server):
    server = judge_server([{"kind": "reply", "content": "x" * (2 << 20)}])
    judge = Judge(server.url, "j", timeout=5.0, max_retries=0)
    try:
        verdict = judge.judge("task", "answer")
    finally:
        judge.close()
    assert verdict.error and "the judge's answer is over the cap of 1048576 bytes" in verdict.error, verdict.error
    assert "cannot connect" not in verdict.error and "check --judge-url" not in verdict.error
