"""`gem eval` loses nothing and says what went wrong: episodes on disk as they finish, SIGTERM/SIGHUP,
a full disk, failed episodes in the exit code, malformed server answers, unknown env ids before the
model loads, a whole-request HTTP deadline, and the eval extra named when it is missing."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from openai_test_server import OpenAITestServer

from gem_core.eval.cli import main
from gem_core.eval.openai_client import ChatEndpoint, EndpointError
from gem_core.eval.runner import evaluate

EASY = "game:GuessTheNumber-v0-easy"
EPISODES_FILENAME = "episodes.jsonl"


def _respond(binary_search):
    return lambda messages: binary_search("\n".join(m["content"] for m in messages))


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_episode_is_on_disk_when_it_finishes_and_the_report_is_rebuilt_from_the_file(binary_search, tmp_path):
    on_disk = []

    def on_episode(record):  # called after the append: the file already holds this episode
        on_disk.append(len(_lines(tmp_path / EPISODES_FILENAME)))

    with OpenAITestServer(respond=_respond(binary_search)) as server:
        report = evaluate(EASY, model="m", base_url=server.base_url, episodes=4, max_turns=2, concurrency=2,
                          progress=False, plots=False, out_dir=str(tmp_path), on_episode=on_episode)
    assert on_disk == [1, 2, 3, 4]
    lines = _lines(tmp_path / EPISODES_FILENAME)
    assert sorted(line["seed"] for line in lines) == [0, 1, 2, 3]
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["envs"][EASY]["episodes"] == sorted(lines, key=lambda line: line["seed"])
    assert [r.seed for r in report.episodes[EASY]] == [0, 1, 2, 3]


def test_a_full_disk_keeps_the_episodes_written_and_says_where(binary_search, tmp_path, monkeypatch):
    import gem_core.eval.episode_log as episode_log
    from gem_core.eval.episode_log import ReportWriteError

    fsyncs = []
    real_fsync = os.fsync

    def fsync(fd):  # the third episode's append finds the disk full (other files' fsyncs pass)
        if os.readlink(f"/proc/self/fd/{fd}").endswith(EPISODES_FILENAME):
            fsyncs.append(fd)
        if len(fsyncs) >= 3 and os.readlink(f"/proc/self/fd/{fd}").endswith(EPISODES_FILENAME):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(episode_log.os, "fsync", fsync)
    with OpenAITestServer(respond=_respond(binary_search)) as server, pytest.raises(ReportWriteError) as caught:
        evaluate(EASY, model="m", base_url=server.base_url, episodes=6, max_turns=1, concurrency=1,
                 progress=False, plots=False, out_dir=str(tmp_path))
    assert "No space left on device" in str(caught.value) and str(tmp_path / EPISODES_FILENAME) in str(caught.value)
    assert [line["seed"] for line in _lines(tmp_path / EPISODES_FILENAME)][:2] == [0, 1]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["interrupted"] is True
    assert [e["seed"] for e in report["envs"][EASY]["episodes"]][:2] == [0, 1]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]  # no temporaries


def test_a_full_disk_at_the_report_leaves_no_tmp_file_and_the_cli_says_where_the_episodes_are(
    binary_search, tmp_path, monkeypatch, capsys
):
    from pathlib import Path

    real_write_text = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.startswith(".report.") and ".partial" in self.name:  # the report's temporary
            real_write_text(self, "{\"trunc", encoding="utf-8")  # half a file, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with OpenAITestServer(respond=_respond(binary_search)) as server:
        code = main(["--model", "m", "--base-url", server.base_url, "--env", EASY, "--episodes", "3", "--max-turns", "1",
                     "--no-progress", "--no-plots", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "No space left on device" in err and str(tmp_path / EPISODES_FILENAME) in err
    assert len(_lines(tmp_path / EPISODES_FILENAME)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [EPISODES_FILENAME, "run.json"]  # no report.json, no temporary


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_write_the_partial_report_like_ctrl_c(tmp_path, binary_search, signum):
    # Two answers, then the server holds every request: the run can only end by the signal.
    with OpenAITestServer(respond=_respond(binary_search), fault="timeout", healthy_requests=2) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "gem_core.eval", "--model", "m", "--base-url", server.base_url,
             "--env", EASY, "--episodes", "5", "--max-turns", "1", "--concurrency", "1",
             "--timeout", "60", "--no-progress", "--no-plots", "--out", str(tmp_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 120  # a guard against a hang, not a speed check
            while server.stats.requests < 3 and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.stats.requests >= 3, process.communicate(timeout=5)
            process.send_signal(signum)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 128 + signum, err
    assert "partial report" in err and "Traceback" not in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["interrupted"] is True
    assert [e["seed"] for e in report["envs"][EASY]["episodes"]] == [0, 1]


def test_failed_episodes_give_exit_1_and_the_first_error(tmp_path, capsys):
    with socket_that_refuses() as url:
        code = main(["--model", "m", "--base-url", url, "--env", EASY, "--episodes", "2", "--retries", "0",
                     "--no-progress", "--no-plots", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "2 of 2 episodes failed" in captured.err and "connection refused" in captured.err
    assert "Traceback" not in captured.err


class socket_that_refuses:
    """A loopback URL whose port was just closed (connection refused)."""

    def __enter__(self) -> str:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc_info):
        return False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"choices": [{"message": {"content": 5}}]}, "content is int"),
        ({"choices": [{"message": {"content": "x"}}], "usage": "abc"}, "usage is str"),
        ({"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "7"}}, "usage.prompt_tokens"),
        ({"choices": [{"message": "x"}]}, "message is not an object"),
        ({"choices": []}, "no choices[0]"),
        ([1, 2], "not a JSON object"),
    ],
)
async def test_malformed_server_answers_raise_endpoint_error_naming_the_field(body, field):
    endpoint = ChatEndpoint("http://testserver/v1", "m", transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    async with endpoint:
        with pytest.raises(EndpointError, match="not a chat completion") as caught:
            await endpoint.chat([{"role": "user", "content": "go"}], max_tokens=4)
    assert field in str(caught.value)


def test_an_unknown_env_id_fails_before_the_model_loads():
    code = (
        "import sys\n"
        "from gem_core.eval.cli import main\n"
        "rc = main(['--model', 'Qwen/Qwen3-0.6B', '--env', 'game:Wordle-v9', '--no-progress'])\n"
        "print('transformers' in sys.modules)\n"
        "sys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "0"})
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == "False"  # no model code was even imported
    assert "game:Wordle-v0" in done.stderr and "Traceback" not in done.stderr


class TrickleServer:
    """Answers 200 with headers at once, then one body byte every 0.2 s for ``seconds``."""

    def __init__(self, seconds: float = 30.0):
        stop = self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                end = time.monotonic() + seconds
                try:
                    while time.monotonic() < end and not stop.is_set():
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc_info):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


async def test_a_trickling_server_cannot_hold_a_request_past_its_timeout():
    """httpx's timeouts bound each read; the trickle (a byte every 0.2 s for 30 s) never trips them."""
    with TrickleServer(seconds=30) as url:
        async with ChatEndpoint(url, "m", timeout=1.0, max_retries=0) as endpoint:
            start = time.monotonic()
            with pytest.raises(EndpointError, match="timed out"):
                await endpoint.chat([{"role": "user", "content": "go"}], max_tokens=4)
            elapsed = time.monotonic() - start
    assert elapsed < 15  # a bound far below the trickle's 30 s, not a speed check


def test_without_the_eval_extra_gem_eval_is_listed_and_names_the_extra(monkeypatch, capsys):
    import importlib.util

    from gem_core.cli import build_parser
    from gem_core.cli import main as gem_main

    assert "eval" in build_parser().format_help()
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real_find_spec(name, *a))
    assert gem_main(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", EASY]) == 2
    err = capsys.readouterr().err
    # The constraints file keeps the CPU torch the README installed (an unconstrained install may pull a CUDA build).
    assert 'pip install -c constraints-cpu.txt -e ".[eval]"' in err and "openai" in err and err.count("\n") == 1


class RewardsBySeed:
    """A scripted backend whose episode of seed ``s`` records ``rewards[s]`` (default ``[1.0]``)."""

    kind, model_name, settings = "scripted", "scripted", {}

    def __init__(self, rewards):
        self.rewards = rewards

    async def run_episode(self, env, env_id, seed, config, record):
        observation, _ = await env.areset(seed=seed)
        record.transcript = [{"role": "user", "content": observation}]
        record.rewards.extend(self.rewards.get(seed, [1.0]))

    async def aclose(self):
        pass


def test_a_reward_that_is_not_finite_fails_its_episode_and_the_run_goes_on(tmp_path):
    """NaN, inf, or finite rewards whose sum overflows: JSON has no such number, so the episode could not be
    written; it is recorded as failed (naming env and seed) and the other episodes still play and count."""
    backend = RewardsBySeed({1: [0.5, float("nan")], 2: [1e308, 1e308], 3: [float("-inf")]})
    report = evaluate(EASY, backend=backend, episodes=5, concurrency=1, progress=False, plots=False, out_dir=str(tmp_path))
    assert report.interrupted is False
    lines = {line["seed"]: line for line in _lines(tmp_path / EPISODES_FILENAME)}
    assert sorted(lines) == [0, 1, 2, 3, 4]
    for seed in (1, 2, 3):
        error = lines[seed]["error"]
        assert "not finite" in error and EASY in error and f"seed {seed}" in error, error
    assert lines[1]["rewards"] == [0.5]  # the finite part of the episode is kept
    assert not any(lines[seed]["error"] for seed in (0, 4))
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["interrupted"] is False
    assert saved["envs"][EASY]["summary"]["episodes_failed"] == 3


def test_a_reward_that_is_not_finite_over_http_fails_its_episode(monkeypatch, tmp_path):
    """The chat backend takes the env's reward as it comes; the runner checks it, as for every backend."""
    from gem_core import registry
    from gem_core.env import Env

    class NanOnSeed1(Env):
        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.seed_ = seed
            return "say anything", {}

        def step(self, action):
            return "done", float("nan") if self.seed_ == 1 else 1.0, True, False, {}

        def sample_random_action(self):
            return "x"

    env_id = "test:NanOnSeed1-v0"
    monkeypatch.setitem(registry._REGISTRY, env_id, registry.EnvSpec(env_id, NanOnSeed1))
    with OpenAITestServer(respond=lambda messages: "anything") as server:
        report = evaluate(env_id, model="m", base_url=server.base_url, backend_options={"timeout": 10.0}, episodes=3,
                          concurrency=1, progress=False, plots=False, out_dir=str(tmp_path))
    assert not report.interrupted
    assert [line["seed"] for line in _lines(tmp_path / EPISODES_FILENAME)] == [0, 1, 2]
    failed = report.failed_episodes()
    assert [r.seed for r in failed] == [1] and "not finite" in failed[0].error


def test_the_episode_log_refuses_a_record_json_cannot_hold_with_a_gem_error(tmp_path):
    from gem_core.errors import GemError
    from gem_core.eval.episode_log import EpisodeLog
    from gem_core.eval.report import EpisodeRecord

    log = EpisodeLog(tmp_path)
    try:
        with pytest.raises(GemError, match=r"seed 7.*nan"):
            log.append(EpisodeRecord(env_id=EASY, seed=7, rewards=[float("nan")]))
        log.append(EpisodeRecord(env_id=EASY, seed=8, rewards=[1.0]))
    finally:
        log.close()
    assert [line["seed"] for line in _lines(tmp_path / EPISODES_FILENAME)] == [8]  # nothing half-written
