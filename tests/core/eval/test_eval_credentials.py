"""Credentials in URLs (issue 47.7): the resume hint printed on SIGTERM masks a URL's password, and an API
key is sent even when the server URL carries user info (httpx turned the user info into a Basic header
that replaced the key's Bearer header)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

pytest.importorskip("openai")

from openai_test_server import OpenAITestServer  # noqa: E402
from request_listener import RequestListener  # noqa: E402

from gem_core.eval import runner  # noqa: E402
from gem_core.eval.cli import main  # noqa: E402
from gem_core.eval.openai_client import ChatEndpoint, EndpointError  # noqa: E402
from gem_core.judge import Judge  # noqa: E402

FAST = ["--episodes", "1", "--max-turns", "1", "--max-new-tokens", "2", "--concurrency", "1", "--no-progress", "--no-plots"]
JUDGE_PASSWORD, MODEL_PASSWORD = "judge-s3cret", "model-hunter2"


def with_user_info(url: str, user: str, password: str) -> str:
    return url.replace("http://", f"http://{user}:{password}@", 1)


def test_the_resume_hint_on_sigterm_masks_every_urls_password(tmp_path, monkeypatch, capsys):
    make_env = runner.placement.make_env

    def make_env_then_sigterm(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return make_env(*args, **kwargs)

    monkeypatch.setattr(runner.placement, "make_env", make_env_then_sigterm)
    out = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: "42") as server:
        code = main([
            "--model", "m", "--base-url", with_user_info(server.base_url, "bob", MODEL_PASSWORD), "--env", "judge:Sample",
            "--judge-url", with_user_info("http://127.0.0.1:1/v1", "alice", JUDGE_PASSWORD), "--judge-model", "j",
            *FAST, "--out", str(out),
        ])
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGTERM, err
    assert "continue with: gem eval --resume" in err and "Traceback" not in err, err
    assert JUDGE_PASSWORD not in err and MODEL_PASSWORD not in err, err
    assert "http://alice:***@127.0.0.1:1/v1" in err and "http://bob:***@127.0.0.1" in err, err
    assert "password where *** stands" in err


def _authorization_sent(url: str, api_key: str | None, listener: RequestListener) -> str | None:
    async def ask() -> None:
        endpoint = ChatEndpoint(url, "m", api_key=api_key, timeout=5, max_retries=0)
        try:
            with pytest.raises(EndpointError) as caught:  # the listener answers 500
                await endpoint.chat([{"role": "user", "content": "hi"}], max_tokens=1)
            assert "s3cret" not in str(caught.value), caught.value
        finally:
            await endpoint.aclose()

    asyncio.run(ask())
    return listener.requests[-1][1]


def test_the_api_key_is_sent_when_the_base_url_has_user_info():
    with RequestListener() as listener:
        assert _authorization_sent(with_user_info(listener.url, "alice", "s3cret") + "/v1", "the-key", listener) == "Bearer the-key"
        # Without a key, the URL's user info is still how the server is logged in to (HTTP Basic).
        assert _authorization_sent(with_user_info(listener.url, "alice", "s3cret") + "/v1", None, listener).startswith("Basic ")


def test_the_judge_sends_its_api_key_with_a_user_info_url_and_names_no_password():
    with RequestListener() as listener:
        judge = Judge(with_user_info(listener.url, "alice", JUDGE_PASSWORD) + "/v1", "j", api_key="judge-key", timeout=5, max_retries=0)
        try:
            verdict = judge.judge("task", "answer")
        finally:
            judge.close()
    assert listener.requests and listener.requests[-1][1] == "Bearer judge-key"
    assert verdict.error is not None and JUDGE_PASSWORD not in verdict.error and "judge-key" not in verdict.error
