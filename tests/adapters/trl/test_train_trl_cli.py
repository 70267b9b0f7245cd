"""examples/train_trl.py as a newcomer meets it: bad arguments fail at once (before torch loads, one
line, nothing written), `--env` fits every game, the tiny tokenizer makes other games' moves learnable,
and Ctrl-C keeps the metrics and the curve of the steps done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from example_usage import RUN_AND_REPORT_TORCH
from test_learning import EXAMPLE, load_example

import gem_core
from gem_adapters.trl.recipe import OUT_LOCK_FILE, own_output_folder


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus", "1"], "unrecognized arguments: --bogus 1"),
        (["--steps", "many"], "invalid int value"),
        (["--env", "game:Wordle-v9"], "Did you mean 'game:Wordle-v0'"),
        (["--env", "game:Wordle-v0", "--env_kwargs", '{"min_number": 1}'], "pass only those names"),
        (["--env_kwargs", "{not json"], "--env_kwargs is not JSON"),
        (["--turn_credit", "gae"], "--turn_credit must be"),
        (["--max_turn_tokens", "4"], "unrecognized arguments: --max_turn_tokens 4"),  # the old name is gone at 0.1.0
        # These four went through the checks and failed after torch loaded, each with a traceback: a ZeroDivisionError in
        # TRL's log-probs (temperature 0), the trainer's InvalidArgument (gamma), AdamW's ValueError (learning rate), and
        # an OSError about an empty repo id (a negative beta: TRL loads a reference model for any beta but 0).
        (["--temperature", "0"], "--temperature must be a number above 0"),
        (["--temperature", "nan"], "--temperature must be a number above 0"),
        (["--gamma", "2"], "--gamma must be a number in [0, 1]"),
        (["--learning_rate", "-1"], "--learning_rate must be a number above 0"),
        (["--beta", "-0.1"], "--beta must be a number 0 or more"),
    ],
)
def test_bad_arguments_fail_before_torch_loads_with_one_line_and_nothing_written(argv, message, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT_TORCH, str(EXAMPLE), *argv, "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stdout.strip() == "torch not imported"
    assert not out.exists()


def test_a_second_run_into_a_held_out_folder_is_refused_before_torch_loads(tmp_path):
    """A seed sweep launched with one --out ran side by side in it: each run emptied log.jsonl at its start and
    appended to the other's, and whichever ended last wrote its metrics beside the other's curve."""
    out = tmp_path / "run"
    with own_output_folder(str(out)):
        (out / "log.jsonl").write_text("the first run's line\n")
        done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT_TORCH, str(EXAMPLE), "--seed", "1", "--out", str(out)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"--out {out} is in use by another process (pid {os.getpid()})" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stdout.strip() == "torch not imported"
    assert (out / "log.jsonl").read_text() == "the first run's line\n"
    assert not (out / OUT_LOCK_FILE).exists()  # the first run's outputs only, once it ended
    with own_output_folder(str(out)):  # and the folder is free again
        pass


@pytest.mark.parametrize("env_id", gem_core.list_envs("game:*"))
def test_every_game_gets_env_kwargs_that_fit_it(env_id):
    example = load_example()
    env_kwargs = example.check_args(example.Args(env=env_id))
    assert env_kwargs == {}  # a named env is the registered one; only a run without --env plays the main job's kwargs


def test_the_tiny_tokenizer_makes_mastermind_moves_single_tokens_with_distinct_rewards():
    """Every token the tiny model can write as a one-token turn, played as the first move of a game."""
    example = load_example()
    env_id = "game:Mastermind-v0-easy"
    _, tokenizer, max_turn_tokens, _ = example.tiny_model_and_tokenizer(env_id, {}, seed=0, max_completion_length=None)
    assert max_turn_tokens == 1
    env, rewards = gem_core.make(env_id), []
    for token_id in range(len(tokenizer)):
        env.reset(seed=0)
        _, reward, *_ = env.step(tokenizer.decode([token_id]))
        rewards.append(reward)
    rewards = np.array(rewards)
    legal = rewards[rewards != rewards.min()]
    assert len(legal) >= 4**3 // 2  # most of the 64 codes are tokens (those random play met)
    assert np.unique(legal).size > 1  # and moves differ in what they earn: something to learn


#: ``python -c SECOND_SIGNAL_WHILE_SAVING SIGNUM SCRIPT ARGS`` runs SCRIPT as ``__main__``, sending it signal SIGNUM once
#: more as the report of the steps done is being written (just before the curve is plotted).
SECOND_SIGNAL_WHILE_SAVING = (
    "import os, runpy, sys\n"
    "from gem_adapters.trl.recipe import report\n"
    "signum, plot = int(sys.argv[1]), report.plot_reward_curve\n"
    "def plot_after_a_second_signal(*args, **kwargs):\n"
    "    os.kill(os.getpid(), signum)\n"
    "    return plot(*args, **kwargs)\n"
    "report.plot_reward_curve = plot_after_a_second_signal\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("second_while_saving", [False, True], ids=["once", "again-while-saving"])
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_keeps_the_metrics_and_the_curve_of_the_steps_done(tmp_path, stop_signal, second_while_saving):
    """Ctrl-C, and SIGTERM as a scheduler sends it before it kills a job (SLURM's preemption, ``docker stop``,
    Kubernetes): SIGTERM killed the run at once, with no metrics and no curve. A second signal once training
    stopped (a second Ctrl-C, a scheduler's repeated SIGTERM) came after the handlers were put back: SIGTERM
    killed the run between metrics.json and the curve, and Ctrl-C lost the curve and said nothing was written."""
    out = tmp_path / "run"
    run = [sys.executable, "-c", SECOND_SIGNAL_WHILE_SAVING, str(int(stop_signal))] if second_while_saving else [sys.executable]
    process = subprocess.Popen(
        [*run, str(EXAMPLE), "--steps", "50", "--prompts_per_step", "2", "--num_generations", "4", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    log = out / "log.jsonl"
    try:
        deadline = time.monotonic() + 600  # a guard against a hang, not a speed check
        while process.poll() is None and time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        assert process.poll() is None, process.communicate()
        process.send_signal(stop_signal)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + stop_signal, stderr
    assert "Traceback" not in stderr and "Interrupted after" in stderr
    metrics = json.loads((out / "metrics.json").read_text())
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert metrics["interrupted"] is True and 2 <= metrics["steps"] < 50
    assert metrics["interrupted_by"] == signal.Signals(stop_signal).name
    assert metrics["reward_per_step"] == pytest.approx([line["reward"] for line in logged])
    assert len(metrics["success_per_step"]) == metrics["steps"]
    assert (out / "reward_curve.png").stat().st_size > 10_000
    step_lines = [line for line in stdout.splitlines() if line.startswith("step ")]
    assert len(step_lines) == metrics["steps"] and all("return" in line and "success" in line for line in step_lines)
    assert "{'loss'" not in stdout  # TRL's per-step dict goes to log.jsonl, not the console
    assert Path(out / "metrics.json").exists()


@pytest.mark.parametrize("room_kib", [0, 24, 96], ids=["full-while-training", "full-at-the-report", "full-at-the-model"])
def test_a_full_disk_costs_the_files_it_cannot_hold_not_the_run(small_disk, room_kib):
    """A disk that fills during a run (another job's checkpoints, a quota) crashed training at its first log line,
    with a traceback; full at the report, the run ended in a PIL traceback, the summary line unprinted. Training
    now goes on without the step log's lines (counted), the figures reach the console, each file is whole or
    absent, and the error is one line."""
    free = os.statvfs(small_disk)
    with open(small_disk / "filler", "wb") as filler:  # leaves room_kib (tmpfs counts whole 4 KiB pages)
        filler.write(b"\0" * max(0, free.f_bavail * free.f_frsize - room_kib * 1024))
    out = small_disk / "run"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "3", "--prompts_per_step", "2", "--num_generations", "4",
                           "--save_model", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("train_trl.py: error:")]
    assert len(error) == 1 and str(out) in error[0] and "No space left on device" in error[0], done.stderr
    assert len([line for line in done.stdout.splitlines() if line.startswith("step ")]) == 3
    assert "reward: first 20%" in done.stdout  # the run's figures, though its files could not all be written
    assert not [path.name for path in out.iterdir() if "partial" in path.name]
    if room_kib == 0:
        assert done.stderr.count("not written") == 1, done.stderr  # said once, not once per step
        assert not (out / "metrics.json").exists()
    else:  # room for the metrics; for the curve only in the last case, and never for the model
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["steps"] == 3 and metrics["log_lines_lost"] == 0
        assert [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()] == [1, 2, 3]
        assert (out / "reward_curve.png").exists() == (room_kib == 96)
        assert ("could not save the model" in error[0]) == (room_kib == 96)
    assert not (out / "model").exists()


def test_a_disk_too_full_for_the_initial_weights_stops_the_run_in_one_line(small_disk):
    """With ``--beta`` above 0 the initial weights go to ``OUT/initial_model`` before training (TRL loads the KL
    reference model from a path): on a full disk that ended in a safetensors traceback."""
    free = os.statvfs(small_disk)
    with open(small_disk / "filler", "wb") as filler:
        filler.write(b"\0" * (free.f_bavail * free.f_frsize))
    out = small_disk / "run"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "3", "--beta", "0.1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"train_trl.py: error: could not save the model in {out}/initial_model" in done.stderr
    assert not [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert sorted(path.name for path in out.iterdir()) == []  # no half-written weights, and the lock file gone
