"""RemoteEnv's hold on server sessions and on its own loop thread: dropped without close(), interrupted by
Ctrl-C mid-step, ending a session over a dropped connection, and options that JSON cannot carry."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")


from serve_waits import SLOW_ENV, sessions, wait_for

from gem_core.errors import GemError
from gem_core.serve.remote import RemoteEnv


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gem-remote-env"]


def test_remote_envs_dropped_without_close_stop_their_loop_threads_and_end_their_sessions(start_server):
    server = start_server("game:GuessTheNumber-v0")
    before = len(loop_threads())
    for seed in range(3):
        env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
        env.reset(seed=seed)
        env.step("\\boxed{3}")
        del env
    gc.collect()
    assert wait_for(lambda: len(loop_threads()) == before, 5), [t.name for t in threading.enumerate()]
    assert wait_for(lambda: sessions(server.url) == 0, 5), "the dropped envs' sessions are still held"


def test_a_closed_remote_env_can_be_dropped_and_a_reopened_one_is_still_released(start_server):
    server = start_server("game:GuessTheNumber-v0")
    before = len(loop_threads())
    env = RemoteEnv(server.url, "game:GuessTheNumber-v0", timeout=10)
    env.reset(seed=0)
    env.close()
    env.reset(seed=1)  # a closed env opens a new session and loop thread on its next use
    assert sessions(server.url) == 1
    del env
    gc.collect()
    assert wait_for(lambda: len(loop_threads()) == before and sessions(server.url) == 0, 5)


@contextlib.contextmanager
def ctrl_c_at_a_terminal():
    """SIGINT raises KeyboardInterrupt in the test process, as at a terminal (a shell's ``&`` job ignores it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_during_a_step_ends_the_session_so_the_next_step_asks_for_a_reset(start_server):
    server = start_server("test:Slow-v0", "--import", SLOW_ENV)
    env = RemoteEnv(server.url, "test:Slow-v0", timeout=20)
    try:
        env.reset()
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        with ctrl_c_at_a_terminal():
            started = time.monotonic()
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                env.step("sleep3")
            timer.join()
        assert time.monotonic() - started < 2.5  # the interrupt did not wait for the step
        # The interrupted step may still run on the server: its session is ended, not stepped out of order.
        assert wait_for(lambda: sessions(server.url) == 0, 3), "the interrupted step's session is still held"
        observation, reward, terminated, truncated, info = env.step("a")
        assert truncated and not terminated and reward == 0.0 and "reset" in info["error"], info
        assert env.reset()[0] == "ready" and env.step("a")[0] == "ok"
    finally:
        env.close()


class DropsFirstDelete(BaseHTTPRequestHandler):
    """A fake ``gem serve`` whose step answers 500 and whose first DELETE connection drops without an answer."""

    deletes: list[str] = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/sessions":
            self.answer(201, b'{"session_id": "s1", "env_id": "x"}')
        elif self.path.endswith("/reset"):
            self.answer(200, b'{"observation": "o", "info": {}}')
        else:
            self.answer(500, b'{"detail": "the env broke"}')

    def do_DELETE(self):
        type(self).deletes.append(self.path)
        if len(type(self).deletes) == 1:
            self.close_connection = True  # a pooled connection the server dropped: no answer
            return
        self.answer(204, b"")

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_delete_that_ends_an_abandoned_session_is_retried_once_after_a_dropped_connection():
    DropsFirstDelete.deletes = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), DropsFirstDelete)
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    env = RemoteEnv(f"http://127.0.0.1:{httpd.server_address[1]}", "x", timeout=5, retries=0)
    try:
        env.reset()
        *_, truncated, info = env.step("a")
        assert truncated and "500" in info["error"]
        assert DropsFirstDelete.deletes == ["/sessions/s1", "/sessions/s1"]
    finally:
        env.close()
        httpd.shutdown()
        httpd.server_close()
        serving.join(5)


def _circular() -> dict:
    options: dict = {}
    options["self"] = options  # a raw RecursionError from the check itself (json's own "Circular reference" before it)
    return options


@pytest.mark.parametrize("options, words", [
    ({"k": {1, 2}}, "options['k'] is of type set"),
    ({"k": np.float32(1.5)}, "options['k'] is of type float32"),
    ({"outer": {"inner": [1, object()]}}, "options['outer']['inner'][1] is of type object"),
    ({(1, 2): "a"}, "options has a key (1, 2) of type tuple"),
    (_circular(), "nested over 100 levels deep"),
])
def test_reset_options_that_json_cannot_carry_are_a_gem_error_naming_the_key(guess_server, options, words):
    env = RemoteEnv(guess_server.url, "game:GuessTheNumber-v0", timeout=10)
    try:
        with pytest.raises(GemError, match=r"not JSON") as caught:
            env.reset(seed=1, options=options)
        assert isinstance(caught.value, TypeError) and words in str(caught.value), str(caught.value)
        assert env.reset(seed=1, options={"k": [1, 2]})[0]  # the env still works
    finally:
        env.close()



class AnswersAPathAsSessionId(DropsFirstDelete):
    """A hostile fake ``gem serve`` whose session id is a path that would steer the client's next requests."""

    paths: list[str] = []

    def do_POST(self):
        type(self).paths.append(self.path)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/sessions":
            self.answer(201, b'{"session_id": "../../admin/wipe?x=#", "env_id": "x"}')
        else:
            self.answer(200, b'{"observation": "o", "info": {}}')


def test_a_session_id_that_is_not_a_plain_token_is_refused_naming_the_server():
    from gem_core.serve.remote import RemoteEnvError

    AnswersAPathAsSessionId.paths = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), AnswersAPathAsSessionId)
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    env = RemoteEnv(url, "x", token="client-secret", timeout=5, retries=0)
    try:
        with pytest.raises(RemoteEnvError, match="session id") as raised:
            env.reset(seed=1)
        assert url in str(raised.value)
        assert AnswersAPathAsSessionId.paths == ["/sessions"]  # nothing sent to the path it named
    finally:
        env.close()
        httpd.shutdown()
        httpd.server_close()
        serving.join(5)


@pytest.mark.parametrize(
    "url, settings, named",
    [
        ("http://127.0.0.1:8765", {"token": ""}, "token"),
        ("http://127.0.0.1:8765", {"token": "p\u00e4sswort"}, "token"),
        ("http://127.0.0.1:8765", {"token": "two\nlines"}, "token"),
        ("http://127.0.0.1:8765", {"timeout": 0}, "timeout"),
        ("http://127.0.0.1:8765", {"timeout": -1}, "timeout"),
        ("http://127.0.0.1:8765", {"timeout": float("nan")}, "timeout"),
        ("http://127.0.0.1:8765", {"retries": -1}, "retries"),
        ("http://127.0.0.1:8765", {"retries": 1.5}, "retries"),
        ("http://127.0.0.1:99999", {}, "port"),
        ("http://127.0.0.1:0", {}, "port"),
    ],
)
def test_bad_settings_are_refused_at_construction_naming_the_argument(url, settings, named):
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=named):
        RemoteEnv(url, "game:GuessTheNumber-v0", **settings)


def test_a_remote_id_with_a_port_out_of_range_is_refused_by_make_naming_the_port():
    from gem_core import make
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="port"):
        make("remote:http://127.0.0.1:99999/game:GuessTheNumber-v0")
