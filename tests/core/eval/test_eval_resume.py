"""`gem eval --resume`: a run killed mid-way (SIGKILL or Ctrl-C) and resumed plays each missing episode
once, loses none, and writes the report an uninterrupted run writes; a resume that asks for other
episodes is refused, naming the flag."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from openai_test_server import OpenAITestServer

from gem_core.eval.cli import main

EASY = "game:GuessTheNumber-v0-easy"
EPISODES, SAMPLES = 5, 2
TOTAL = EPISODES * SAMPLES
RUN = ["--model", "m", "--env", EASY, "--episodes", str(EPISODES), "--samples", str(SAMPLES), "--seed", "3",
       "--max-turns", "3", "--concurrency", "2", "--no-progress", "--no-plots"]
TIMING = ("started_at", "finished_at", "resumed_at")


class GatedBinarySearch:
    """The scripted binary-search player; after ``hold_after`` requests it holds every answer until
    ``gate`` opens, so a run can be killed at a known point with requests in flight."""

    def __init__(self, move):
        self.move = move
        self.lock = threading.Lock()
        self.requests = 0
        self.episode_starts = 0  # requests whose conversation is one observation long: a new episode
        self.hold_after: int | None = None
        self.held = 0
        self.gate = threading.Event()

    def __call__(self, messages):
        with self.lock:
            self.requests += 1
            self.episode_starts += sum(m["role"] == "user" for m in messages) == 1
            hold = self.hold_after is not None and self.requests > self.hold_after
            self.held += hold
        if hold:
            self.gate.wait(120)
        return self.move("\n".join(m["content"] for m in messages))


def _report(path):
    report = json.loads((path / "report.json").read_text())
    return {k: v for k, v in report.items() if k not in TIMING}


def _log_keys(path):
    return [(e["env_id"], e["seed"], e["sample"]) for e in map(json.loads, (path / "episodes.jsonl").read_text().splitlines())]


@pytest.fixture(scope="module")
def server_and_player(binary_search):
    player = GatedBinarySearch(binary_search)
    with OpenAITestServer(respond=player) as server:
        yield server, player
        player.gate.set()


@pytest.fixture(scope="module")
def uninterrupted(server_and_player, tmp_path_factory):
    server, _ = server_and_player
    out = tmp_path_factory.mktemp("uninterrupted")
    assert main([*RUN, "--base-url", server.base_url, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_run_resumed_plays_each_missing_episode_once_and_writes_the_uninterrupted_report(
    server_and_player, uninterrupted, tmp_path, signum, capsys
):
    server, player = server_and_player
    player.gate.clear()
    player.held = 0
    player.hold_after = player.requests + 7  # a few episodes finish, then two requests are held
    process = subprocess.Popen(
        [sys.executable, "-m", "gem_core.eval", *RUN, "--base-url", server.base_url, "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a speed check
        while player.held < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert player.held == 2, process.communicate(timeout=5)
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        player.hold_after = None
        player.gate.set()  # the held answers go to a closed connection
    assert process.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 130), err
    assert (tmp_path / "report.json").exists() == (signum != signal.SIGKILL)  # SIGKILL leaves no report
    finished = _log_keys(tmp_path)
    assert 0 < len(finished) < TOTAL

    starts_before = player.episode_starts
    # Every setting from run.json but the URL, which a run file never chooses (issue 27.2).
    assert main(["--resume", str(tmp_path), "--base-url", server.base_url, "--no-progress", "--no-plots"]) == 0
    assert player.episode_starts - starts_before == TOTAL - len(finished)  # only the missing episodes ran
    keys = _log_keys(tmp_path)
    assert keys[: len(finished)] == finished and max(Counter(keys).values()) == 1 and len(keys) == TOTAL
    resumed = json.loads((tmp_path / "report.json").read_text())
    assert len(resumed["resumed_at"]) == 1 and not resumed["interrupted"]
    assert _report(tmp_path) == _report(uninterrupted)
    assert "episodes re-scored" not in capsys.readouterr().out


def test_resuming_a_finished_run_plays_nothing_and_keeps_the_report(server_and_player, uninterrupted, tmp_path):
    import shutil

    server, player = server_and_player
    shutil.copytree(uninterrupted, tmp_path / "run")
    requests = player.requests
    assert main(["--resume", str(tmp_path / "run"), "--base-url", server.base_url, "--no-progress", "--no-plots"]) == 0
    assert player.requests == requests
    assert _report(tmp_path / "run") == _report(uninterrupted)


def test_a_line_cut_short_by_the_kill_is_dropped_and_its_episode_played_again(server_and_player, uninterrupted, tmp_path):
    import shutil

    server, player = server_and_player
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    (run / "report.json").unlink()
    lines = (run / "episodes.jsonl").read_text().splitlines(keepends=True)
    (run / "episodes.jsonl").write_text("".join(lines[:4]) + lines[4][:40])  # the kill hit mid-write
    starts = player.episode_starts
    assert main(["--resume", str(run), "--base-url", server.base_url, "--no-progress", "--no-plots"]) == 0
    assert player.episode_starts - starts == TOTAL - 4
    assert len(_log_keys(run)) == TOTAL
    assert _report(run) == _report(uninterrupted)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--episodes", "6"], "--episodes"),
        (["--seed", "0"], "--seed"),
        (["--samples", "1"], "--samples"),
        (["--env", "game:Wordle-v0"], "--env"),
        (["--model", "other"], "--model"),
        (["--temperature", "0.5"], "--temperature"),
    ],
)
def test_a_resume_that_asks_for_other_episodes_is_refused_naming_the_flag(
    server_and_player, uninterrupted, tmp_path, flags, named, capsys
):
    import shutil

    server, player = server_and_player
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    requests = player.requests
    assert main(["--resume", str(run), "--base-url", server.base_url, "--no-progress", "--no-plots", *flags]) == 2
    err = capsys.readouterr().err
    assert named in err and "the run there used" in err and err.count("\n") == 1, err
    assert player.requests == requests
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # nothing touched


def test_resume_says_what_is_wrong_with_the_folder(tmp_path, capsys):
    assert main(["--resume", str(tmp_path), "--no-progress"]) == 2
    assert "holds no gem eval run" in capsys.readouterr().err
    assert main(["--resume", str(tmp_path), "--out", str(tmp_path / "other"), "--no-progress"]) == 2
    assert "drop --out" in capsys.readouterr().err
    assert main(["--resume", str(tmp_path), "--rescore", str(tmp_path)]) == 2
    assert "cannot be combined" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["{broken", "[1]", '{"format": "gem.eval_run/1"}'])
def test_a_damaged_run_file_is_one_line_naming_the_file(tmp_path, capsys, content):
    (tmp_path / "run.json").write_text(content)
    assert main(["--resume", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "run.json") in err, err


def test_a_resume_that_asks_for_other_episodes_is_refused_before_the_model_loads(
    server_and_player, uninterrupted, tmp_path, capsys, monkeypatch
):
    """Loading a real model takes minutes: the episode settings are compared with the run's first."""
    import shutil

    import gem_core.eval.runner as runner

    server, _ = server_and_player
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)

    def no_backend(*args, **kwargs):
        raise AssertionError("the backend was built before the resume was checked")

    monkeypatch.setattr(runner, "make_backend", no_backend)
    assert main(["--resume", str(run), "--base-url", server.base_url, "--no-progress", "--no-plots", "--episodes", "7"]) == 2
    err = capsys.readouterr().err
    assert "--episodes is 7 but the run there used 5" in err and err.count("\n") == 1, err


def test_a_refused_resume_leaves_the_folder_as_it_was(tmp_path):
    """The episodes log is checked before anything is written: a refused resume adds no resumed_at to run.json
    and keeps the log's unparsable line (the user may want to look at it, or resume the right run)."""
    from scripted_backend import OneStepBackend

    from gem_core.eval import evaluate

    out = tmp_path / "run"
    evaluate([EASY], backend=OneStepBackend(), episodes=3, out_dir=str(out), plots=False, progress=False)
    first = (out / "episodes.jsonl").read_text().splitlines(keepends=True)[0]
    foreign = {**json.loads(first), "seed": 100}  # an episode this run does not ask for
    (out / "episodes.jsonl").write_text(first + '{"env_id": "cut short\n' + json.dumps(foreign) + "\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    backend = OneStepBackend()
    with pytest.raises(ValueError, match=r"holds episodes this run does not ask for, e\.g\. .*100"):
        evaluate([EASY], backend=backend, episodes=3, out_dir=str(out), resume=True, plots=False, progress=False)
    assert backend.episodes == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
