"""gem_core/eval/cli.py end to end: `gem eval` with the tiny model saved to disk, the plots, --compare,
and Ctrl-C writing a partial report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from openai_test_server import OpenAITestServer
from PIL import Image

from gem_core.eval.cli import main

ENVS = ["game:GuessTheNumber-v0-easy", "game:Wordle-v0"]
ENV_VERDICT = {"game:GuessTheNumber-v0-easy": "Correct!", "game:Wordle-v0": "Solved!"}


@pytest.fixture(scope="module")
def tiny_run(tiny_model_dir, tmp_path_factory):
    """One `gem eval` run of the tiny model on both envs (shared by the checks below)."""
    out = tmp_path_factory.mktemp("run")
    argv = ["--model", str(tiny_model_dir), "--episodes", "3", "--seed", "7", "--concurrency", "3",
            "--max-new-tokens", "8", "--temperature", "1.0", "--no-progress", "--out", str(out)]
    for env_id in ENVS:
        argv += ["--env", env_id]
    assert main(argv) == 0
    return out


def test_gem_eval_report_numbers_agree_with_its_own_transcripts(tiny_run, tiny_model_dir):
    report = json.loads((tiny_run / "report.json").read_text())
    assert report["model"] == str(tiny_model_dir) and report["backend"] == "transformers"
    assert report["config"]["episodes"] == 3 and report["config"]["seed"] == 7 and not report["interrupted"]
    assert list(report["envs"]) == ENVS
    for env_id, env in report["envs"].items():
        episodes, summary = env["episodes"], env["summary"]
        assert [e["seed"] for e in episodes] == [7, 8, 9] and not any(e["error"] for e in episodes)
        turns, format_errors, returns, wins = [], 0, [], []
        for e in episodes:
            transcript = e["transcript"]
            replies = [m for m in transcript[1:] if m["role"] == "user"]  # the env's answer to each action
            assert [m["role"] for m in transcript] == ["user", "assistant"] * len(replies) + ["user"]
            assert e["turns"] == len(replies) == len(e["rewards"])
            for reply, reward in zip(replies, e["rewards"]):
                invalid = reply["content"].startswith("Invalid")
                format_errors += invalid
                if invalid:
                    assert reward == pytest.approx(-0.1)
            turns.append(len(replies))
            returns.append(sum(e["rewards"]))
            assert e["return"] == pytest.approx(returns[-1])
            wins.append(ENV_VERDICT[env_id] in replies[-1]["content"])
            assert e["success"] == wins[-1]
            assert e["completion_tokens"] > 0 and e["prompt_tokens"] > e["completion_tokens"]
        assert summary["episodes_completed"] == 3 and summary["episodes_failed"] == 0
        assert summary["success_rate"] == pytest.approx(np.mean(wins))
        assert summary["mean_turns"] == pytest.approx(np.mean(turns))
        assert summary["mean_return"] == pytest.approx(np.mean(returns))
        assert summary["format_error_rate"] == pytest.approx(format_errors / sum(turns))
        low, high = summary["return_ci"]
        assert min(returns) - 1e-9 <= low <= summary["mean_return"] <= high <= max(returns) + 1e-9
        assert summary["total_tokens"] == sum(e["prompt_tokens"] + e["completion_tokens"] for e in episodes)


@pytest.mark.parametrize("name", ["success_and_return.png", "return_distribution.png"])
def test_gem_eval_writes_valid_png_plots(tiny_run, name):
    path = tiny_run / name
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 300 and image.height > 200
        pixels = np.asarray(image.convert("L"))
    assert pixels.std() > 0  # something was drawn


def test_gem_eval_compare_prints_both_reports_side_by_side(tiny_run, tmp_path, capsys):
    other = json.loads((tiny_run / "report.json").read_text())
    other["model"] = "other-model"
    other["envs"]["game:Wordle-v0"]["episodes"][0]["rewards"] = [1.0]
    other["envs"]["game:Wordle-v0"]["episodes"][0]["success"] = True
    (tmp_path / "b.json").write_text(json.dumps(other))
    assert main(["--compare", str(tiny_run / "report.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    for text in [*ENVS, "success", "mean return", "format errors", "other-model", "Δ"]:
        assert text in out
    assert "+33.3%" in out  # Wordle success: B won one episode of three more than A


def test_the_gem_command_dispatches_eval(tiny_run, capsys):
    from gem_core.cli import main as gem_main

    report = str(tiny_run / "report.json")
    assert gem_main(["eval", "--compare", report, report]) == 0
    assert "game:Wordle-v0" in capsys.readouterr().out


def test_gem_eval_usage_errors_exit_2_with_a_message(tmp_path, capsys):
    assert main(["--env", "game:Wordle-v0"]) == 2
    assert "--model is required" in capsys.readouterr().err
    assert main(["--model", "x", "--base-url", "http://127.0.0.1:9/v1", "--env", "game:Wordle-v9", "--no-progress",
                 "--out", str(tmp_path)]) == 2
    assert "game:Wordle-v0" in capsys.readouterr().err  # the suggestion
    (tmp_path / "bad.json").write_text("{}")
    assert main(["--compare", str(tmp_path / "bad.json"), str(tmp_path / "bad.json")]) == 2
    assert "Not a gem eval report" in capsys.readouterr().err


def test_ctrl_c_writes_the_partial_report_and_exits_130(tmp_path, binary_search):
    """Ctrl-C cancels the request the server holds (SIGINT to exit: 1.4 s at load 10 on 2 cores; 4.4 s
    with plots, which other tests cover, so they are off here: the 60 s bound is for the exit alone)."""
    def respond(messages):
        return binary_search("\n".join(m["content"] for m in messages))

    # Two answers, then the server holds every request: the run can only end by Ctrl-C.
    with OpenAITestServer(respond=respond, fault="timeout", healthy_requests=2) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "gem_core.eval", "--model", "m", "--base-url", server.base_url,
             "--env", "game:GuessTheNumber-v0-easy", "--episodes", "5", "--max-turns", "1", "--concurrency", "1",
             "--timeout", "60", "--no-progress", "--no-plots", "--out", str(tmp_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + 120  # a guard against a hang, not a speed check
            while server.stats.requests < 3 and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.stats.requests >= 3, process.communicate(timeout=5)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert "partial report" in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["interrupted"] is True
    episodes = report["envs"]["game:GuessTheNumber-v0-easy"]["episodes"]
    assert [e["seed"] for e in episodes] == [0, 1] and not any(e["error"] for e in episodes)


def test_gem_eval_samples_reports_pass_at_k_in_the_json_and_the_table(tmp_path, binary_search, capsys):
    """Every second episode gets a player that never answers in the game's format, so with one episode
    at a time each seed's two samples are one win and one loss: pass@1 = mean@2 = 1/2, pass@2 = 1."""
    starts = []

    def respond(messages):
        if len(messages) == 1:
            starts.append(1)
        if len(starts) % 2 == 0:
            return "no idea"
        return binary_search("\n".join(m["content"] for m in messages))

    with OpenAITestServer(respond=respond) as server:
        code = main(["--model", "m", "--base-url", server.base_url, "--env", "game:GuessTheNumber-v0-easy",
                     "--episodes", "3", "--samples", "2", "--max-turns", "5", "--concurrency", "1", "--no-progress",
                     "--out", str(tmp_path)])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    env = report["envs"]["game:GuessTheNumber-v0-easy"]
    assert [(e["seed"], e["sample"]) for e in env["episodes"]] == [(s, i) for s in range(3) for i in range(2)]
    assert [e["success"] for e in env["episodes"]] == [True, False] * 3
    summary = env["summary"]
    assert summary["pass_at_k"] == {"1": pytest.approx(0.5), "2": pytest.approx(1.0)}
    assert summary["mean_at_k"] == pytest.approx(0.5) and summary["episodes_requested"] == 6
    out = capsys.readouterr().out
    assert "pass@2" in out and "mean@2" in out and "100.0%" in out


def test_names_with_brackets_are_printed_as_given_not_read_as_markup(tmp_path, capsys):
    """A served model name is any text (vLLM --served-model-name), and so is a path: '[/v2]' closes no style."""
    model, out = "team/model[/v2]", tmp_path / "runs[/x]"
    with OpenAITestServer(respond=lambda messages: "no idea") as server:
        code = main(["--model", model, "--base-url", server.base_url, "--env", "game:GuessTheNumber-v0-easy",
                     "--episodes", "2", "--max-turns", "1", "--timeout", "10", "--no-progress", "--no-plots",
                     "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert model in captured.out and f"{out}/" in captured.out
    assert main(["--compare", str(out), str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.count(model) == 2 and f"A = {out}" in captured.out, captured.err
