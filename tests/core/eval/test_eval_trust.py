"""`gem eval` treats a run folder as data (issue 27.2, 27.10) and says what is wrong in one line (28.4).

A tampered ``run.json`` must not choose where requests (and the user's API key) go, nor which model
path is loaded; a malformed ``episodes.jsonl`` or ``run.json`` is refused or skipped with a message,
never a traceback or an allocation it sizes. The attacks run through the real CLI as a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys

import pytest
from request_listener import RequestListener
from openai_test_server import OpenAITestServer

from gem_core.eval.cli import main

EASY = "game:GuessTheNumber-v0-easy"
SECRET = "sk-the-users-own-key"
QUIET = ["--no-progress", "--no-plots"]


def _run_json(folder, *, backend="openai-chat", model="m", env_ids=(EASY,), base_url=None, **config):
    settings = {"episodes": 2, "seed": 0, "samples": 1, "concurrency": 1, "max_turns": 2, "max_new_tokens": 8,
                "temperature": 1.0, "top_p": 1.0, "top_k": 0, "system_prompt": None, **config}
    settings["backend_settings"] = {"base_url": base_url, "timeout": 5.0, "max_retries": 0, "max_in_flight": 1} if base_url else {}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({
        "format": "gem.eval_run/1", "model": model, "backend": backend, "env_ids": list(env_ids),
        "config": settings, "started_at": "2024-01-01T00:00:00+00:00", "resumed_at": [],
    }))
    return folder


def _gem_eval(*args, cwd, memory_limit: int | None = None):
    env = {**os.environ, "OPENAI_API_KEY": SECRET}

    def limit():  # a refused count must fail fast; without the fix it fails with MemoryError, not the OOM killer
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    return subprocess.run([sys.executable, "-m", "gem_core.cli", "eval", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env, preexec_fn=limit)


# -- 27.2: the run file never chooses a destination ------------------------------------------------------


def test_resume_never_sends_the_api_key_to_a_base_url_from_run_json(tmp_path):
    with RequestListener() as listener:
        run = _run_json(tmp_path / "run", base_url=listener.url + "/v1")
        done = _gem_eval("--resume", str(run), *QUIET, cwd=tmp_path)
    assert listener.requests == [], "the tampered run.json received the run's requests"
    assert done.returncode == 2 and "--base-url" in done.stderr and "run.json" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stderr


def test_resume_with_the_users_base_url_goes_there_not_to_the_files(tmp_path, binary_search):
    with RequestListener() as listener, OpenAITestServer(respond=lambda m: binary_search("\n".join(x["content"] for x in m))) as server:
        run = _run_json(tmp_path / "run", base_url=listener.url + "/v1")
        done = _gem_eval("--resume", str(run), "--base-url", server.base_url, *QUIET, cwd=tmp_path)
        assert listener.requests == [] and server.stats.requests > 0
    assert done.returncode == 0, done.stderr


def test_resume_refuses_a_remote_env_id_from_run_json(tmp_path, binary_search):
    with RequestListener() as listener, OpenAITestServer(respond=lambda m: binary_search("\n".join(x["content"] for x in m))) as server:
        run = _run_json(tmp_path / "run", base_url=server.base_url, env_ids=[f"remote:{listener.url}/{EASY}"])
        done = _gem_eval("--resume", str(run), "--base-url", server.base_url, *QUIET, cwd=tmp_path)
        assert listener.requests == [] and server.stats.requests == 0
    assert done.returncode == 2 and "--env" in done.stderr and "remote:" in done.stderr, done.stderr


def _planted_module(folder):
    """An ``evil.py`` in the folder the command runs in (``python -m`` puts it first on the path) and its marker."""
    marker = folder / "MARKER"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return marker


def test_resume_refuses_a_verifiers_env_id_from_run_json(tmp_path):
    """verifiers:<module> imports the module it names: a run file naming verifiers:evil beside an evil.py ran it."""
    marker = _planted_module(tmp_path)
    run = _run_json(tmp_path / "run", base_url="http://127.0.0.1:1/v1", env_ids=["verifiers:evil"])
    done = _gem_eval("--resume", str(run), "--base-url", "http://127.0.0.1:1/v1", *QUIET, cwd=tmp_path)
    assert not marker.exists()
    assert done.returncode == 2 and "--env" in done.stderr and "verifiers:" in done.stderr, done.stderr


def test_rescore_refuses_a_verifiers_env_id_from_the_run(tmp_path):
    marker = _planted_module(tmp_path)
    run = _run_json(tmp_path / "run", env_ids=["verifiers:evil"], base_url="http://127.0.0.1:1/v1")
    record = {"env_id": "verifiers:evil", "seed": 0, "sample": 0, "rewards": [0.0], "transcript": [
        {"role": "user", "content": "guess"}, {"role": "assistant", "content": "\\boxed{5}"}]}
    (run / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    done = _gem_eval("--rescore", str(run), *QUIET, cwd=tmp_path)
    assert not marker.exists()
    assert done.returncode == 2 and "verifiers:" in done.stderr and "--env" in done.stderr, done.stderr


def test_resume_of_an_in_process_run_loads_no_model_path_from_run_json(tmp_path):
    marker_dir = tmp_path / "planted-model"  # what a tampered file would point at
    run = _run_json(tmp_path / "run", backend="transformers", model=str(marker_dir))
    done = _gem_eval("--resume", str(run), *QUIET, cwd=tmp_path)
    assert done.returncode == 2 and "--model" in done.stderr and "run.json" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_rescore_refuses_a_remote_env_id_from_the_run(tmp_path):
    with RequestListener() as listener:
        env_id = f"remote:{listener.url}/{EASY}"
        run = _run_json(tmp_path / "run", env_ids=[env_id], base_url="http://127.0.0.1:1/v1")
        record = {"env_id": env_id, "seed": 0, "sample": 0, "rewards": [0.0], "transcript": [
            {"role": "user", "content": "guess"}, {"role": "assistant", "content": "\\boxed{5}"}]}
        (run / "episodes.jsonl").write_text(json.dumps(record) + "\n")
        done = _gem_eval("--rescore", str(run), *QUIET, cwd=tmp_path)
    assert listener.requests == []
    assert done.returncode == 2 and "remote:" in done.stderr and "--env" in done.stderr, done.stderr


# -- 27.10: malformed files and absurd counts ----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_line",
    [
        json.dumps({"env_id": EASY, "seed": 0, "sample": 0, "rewards": ["abc"]}),  # a non-numeric reward
        "[" * 100_000 + "]" * 100_000,  # nesting deeper than the parser's recursion
        json.dumps({"env_id": EASY, "seed": "0", "sample": 0, "rewards": [1.0]}),
        json.dumps({"env_id": EASY, "seed": 0, "sample": 0, "rewards": [1.0], "transcript": "x"}),
    ],
)
def test_resume_skips_a_malformed_episode_line_and_plays_that_episode_again(tmp_path, binary_search, bad_line, capsys):
    with OpenAITestServer(respond=lambda m: binary_search("\n".join(x["content"] for x in m))) as server:
        run = _run_json(tmp_path / "run", base_url=server.base_url, episodes=1)
        (run / "episodes.jsonl").write_text(bad_line + "\n")
        code = main(["--resume", str(run), "--base-url", server.base_url, *QUIET])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    report = json.loads((run / "report.json").read_text())
    (episode,) = report["envs"][EASY]["episodes"]
    assert episode["seed"] == 0 and all(isinstance(r, float) for r in episode["rewards"])
    assert isinstance(episode["transcript"], list) and episode["transcript"][0]["role"] == "user"  # played again


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"episodes": 10**12}, "episodes"),
        ({"samples": 10**9}, "samples"),
        ({"episodes": "ten"}, "episodes"),
        ({"max_new_tokens": -3}, "max_new_tokens"),
        ({"temperature": "hot"}, "temperature"),
    ],
)
def test_resume_refuses_counts_and_settings_from_run_json_before_allocating(tmp_path, config, named):
    with RequestListener() as listener:
        run = _run_json(tmp_path / "run", base_url=listener.url + "/v1", **config)
        done = _gem_eval("--resume", str(run), "--base-url", listener.url + "/v1", *QUIET, cwd=tmp_path,
                         memory_limit=4 << 30)
        assert listener.requests == []
    assert done.returncode == 2 and named in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_resume_refuses_a_deeply_nested_run_json(tmp_path, capsys):
    (tmp_path / "run.json").write_text('{"format": "gem.eval_run/1", "config": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["--resume", str(tmp_path), *QUIET]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run.json" in err, err


def test_an_absurd_episodes_flag_is_refused_before_anything_is_allocated(tmp_path):
    done = _gem_eval("--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--env", EASY, "--episodes", str(10**12),
                     *QUIET, "--out", str(tmp_path / "out"), cwd=tmp_path, memory_limit=4 << 30)
    assert done.returncode == 2 and "--episodes" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_episodes_are_scheduled_as_they_go_not_all_up_front():
    """A long run keeps about --concurrency episodes in flight, not one task per planned episode."""
    from gem_core.eval.report import EpisodeRecord
    from gem_core.eval.runner import EvalConfig, evaluate_async

    class CountingBackend:
        kind, model_name, settings = "counting", "m", {}

        def __init__(self):
            self.most_tasks, self.played, self.main = 0, 0, None

        async def run_episode(self, env, env_id, seed, config, record: EpisodeRecord):
            self.most_tasks = max(self.most_tasks, len(asyncio.all_tasks()))
            self.played += 1
            record.rewards = [0.0]
            if self.played == 40:
                self.main.cancel()  # enough seen: stop the run
            await asyncio.sleep(0)

        async def aclose(self):
            pass

    backend = CountingBackend()

    async def run():
        backend.main = asyncio.current_task()
        await evaluate_async(backend, EvalConfig(env_ids=[EASY], episodes=100_000, concurrency=4, progress=False))

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())
    assert 40 <= backend.played < 100 and backend.most_tasks <= 4 + 2, backend.most_tasks


# -- 28.4: every failure is one line naming its cause ------------------------------------------------------


def test_a_refused_connection_names_the_url_and_the_flag(tmp_path, capsys):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    sock.close()
    code = main(["--model", "m", "--base-url", url, "--env", EASY, "--episodes", "1", "--retries", "0", *QUIET,
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot connect to {url}: connection refused; is the server running? (--base-url)" in err, err
    assert "ExceptionGroup" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--base-url", ""], "--base-url"),
        (["--timeout", "5"], "--timeout"),
        (["--retries", "1"], "--retries"),
        (["--max-in-flight", "2"], "--max-in-flight"),
    ],
)
def test_http_flags_without_a_usable_base_url_are_refused_naming_the_flag(tmp_path, capsys, flags, named):
    code = main(["--model", "/nonexistent-model", "--env", EASY, "--episodes", "1", *QUIET, "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and named in err and err.count("\n") == 1, err


def test_an_existing_out_folder_with_episodes_is_kept_unless_resume_or_overwrite(tmp_path, binary_search, capsys):
    out = tmp_path / "out"
    respond = lambda m: binary_search("\n".join(x["content"] for x in m))  # noqa: E731
    with OpenAITestServer(respond=respond) as server:
        run = ["--model", "m", "--base-url", server.base_url, "--env", EASY, "--max-turns", "3", *QUIET, "--out", str(out)]
        assert main([*run, "--episodes", "3"]) == 0
        before = (out / "episodes.jsonl").read_bytes()
        assert len(before.splitlines()) == 3
        capsys.readouterr()
        assert main([*run, "--episodes", "1"]) == 2
        err = capsys.readouterr().err
        assert "--resume" in err and "--overwrite" in err and str(out) in err, err
        assert (out / "episodes.jsonl").read_bytes() == before
        assert main([*run, "--episodes", "1", "--overwrite"]) == 0
        assert len((out / "episodes.jsonl").read_bytes().splitlines()) == 1


def test_a_model_path_that_does_not_exist_says_so(tmp_path, capsys):
    missing = tmp_path / "no-such-model"
    code = main(["--model", str(missing), "--env", EASY, "--episodes", "1", *QUIET, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and f"{missing} does not exist" in err and "Repo id" not in err, err


def test_an_unexpected_error_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    import gem_core.eval.runner as runner

    def broken(*args, **kwargs):
        raise RuntimeError("something no one planned for")

    monkeypatch.setattr(runner, "evaluate", broken)
    code = main(["--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--env", EASY, *QUIET, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1 and "RuntimeError: something no one planned for" in err and err.count("\n") == 1, err


def test_compare_refuses_a_report_whose_counts_would_size_an_allocation(tmp_path):
    report = {"format_version": 1, "model": "m", "backend": "openai-chat", "config": {"episodes": [0], "samples": 10**9},
              "envs": {EASY: {"episodes": []}}}
    (tmp_path / "a.json").write_text(json.dumps(report))
    done = _gem_eval("--compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"), cwd=tmp_path, memory_limit=4 << 30)
    assert done.returncode == 2 and "episodes" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_refused_connection_wrapped_in_an_exception_group_is_still_named():
    """anyio wraps a failed connect in an ExceptionGroup on some versions: the cause is found under it."""
    import httpx
    import openai

    from gem_core.eval.openai_client import connection_failure

    try:
        try:
            raise ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionRefusedError(111, "Connect call failed")])
        except ExceptionGroup as group:
            raise httpx.ConnectError("") from group
    except httpx.ConnectError as connect:
        error = openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
        error.__cause__ = connect
    message = connection_failure("http://127.0.0.1:9/v1", error, "4 attempts")
    assert message.startswith("cannot connect to http://127.0.0.1:9/v1: connection refused; is the server running? (--base-url)")
    assert "ExceptionGroup" not in message and "(4 attempts)" in message
