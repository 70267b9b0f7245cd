import signal
import subprocess
import sys

import pytest

from gem_core.cli import main


def test_list_prints_matching_ids(capsys):
    assert main(["list", "game:Wordle*"]) == 0  # one line per id, the id first (then its data and extra columns)
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == [
        "game:Wordle-v0", "game:Wordle-v0-easy", "game:Wordle-v0-hard", "game:Wordle-v0-random"]


def test_list_unknown_pattern_fails(capsys):
    assert main(["list", "nothing-matches-this"]) == 1


def test_play_a_whole_game_from_stdin():
    # Binary search typed by a "person": the env's answers steer the next guess.
    proc = subprocess.Popen(
        [sys.executable, "-m", "gem_core.cli", "play", "game:GuessTheNumber-v0-hard", "--seed", "5"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
    )
    low, high, transcript = 1, 100, ""
    for _ in range(7):
        guess = (low + high) // 2
        proc.stdin.write(f"\\boxed{{{guess}}}\n")
        proc.stdin.flush()
        line = ""
        while "your move>" not in line:  # the env's answer follows the prompt on the same line
            line = proc.stdout.readline()
            transcript += line
        if "Correct" in line:
            break
        low, high = (guess + 1, high) if "higher" in line else (low, guess - 1)
    proc.stdin.close()
    transcript += proc.stdout.read()
    assert proc.wait(timeout=10) == 0
    assert "Episode won" in transcript


def test_play_unknown_env_suggests_ids(capsys):
    assert main(["play", "game:Wordl-v0"]) == 2
    assert "game:Wordle-v0" in capsys.readouterr().err


# -- every error case: one clear line on stderr, no traceback, the right exit code, nothing left behind --

_WITH_BROKEN_ENVS = (
    "import sys\n"
    "import gem_core\n"
    "from gem_core.cli import main\n"
    "gem_core.list_envs()  # the builtins first\n"
    "def fail(error):\n"
    "    def build(**kwargs):\n"
    "        raise error\n"
    "    return build\n"
    "gem_core.register('test:MissingExtra-v0', fail(ImportError('rg: envs need reasoning-gym: pip install -e \".[rg]\"')))\n"
    "gem_core.register('test:Offline-v0', fail(RuntimeError('openai/gsm8k is not cached and the hub is offline')))\n"
    "gem_core.register('test:NoBwrap-v0', fail(RuntimeError('bubblewrap (bwrap) is not installed: apt-get install bubblewrap')))\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _gem(*argv, cwd, stdin=""):
    return subprocess.run([sys.executable, "-c", _WITH_BROKEN_ENVS, *argv], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["list", "nothing-matches-this"], 1, "No env id matches"),
        (["play", "game:Wordl-v0"], 2, "Did you mean 'game:Wordle-v0'"),
        (["play", "test:MissingExtra-v0"], 1, 'pip install -e ".[rg]"'),
        (["play", "test:Offline-v0"], 1, "not cached"),
        (["play", "test:NoBwrap-v0"], 1, "apt-get install bubblewrap"),
        (["eval", "--env", "game:Wordle-v0"], 2, "--model is required"),
        (["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", "game:Wordl-v0", "--out", "o"], 2,
         "Did you mean 'game:Wordle-v0'"),
        (["eval", "--model", "runs/none", "--env", "game:Wordl-v0"], 2, "Did you mean 'game:Wordle-v0'"),
        (["eval", "--compare", "a.json", "b.json"], 2, "--compare"),
    ],
)
def test_cli_errors_are_one_line_with_the_right_exit_code_and_leave_nothing(argv, code, message, tmp_path):
    done = _gem(*argv, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_in_play_exits_130_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "gem_core.cli", "play", "game:Wordle-v0", "--seed", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        shown = ""
        while not shown.endswith("your move> "):  # the game waits for input
            char = proc.stdout.read(1)
            assert char, proc.stderr.read()
            shown += char
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "Stopped after 0 turns" in out


def test_a_move_without_boxed_gets_a_hint_not_a_penalty_and_blocks_are_one_move():
    stdin = "crane\n```\nmy guess:\n\\boxed{5}\n```\n"
    done = subprocess.run([sys.executable, "-m", "gem_core.cli", "play", "game:GuessTheNumber-v0-easy", "--seed", "0"],
                          input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Moves go inside \\boxed{}: type \\boxed{crane}" in done.stdout
    assert "Invalid" not in done.stdout  # the bare word cost no turn and no penalty
    assert "[turn 2]" in done.stdout and "[turn 3]" not in done.stdout  # the block was one move
    assert "Input ended after 1 turns" in done.stdout


def test_ctrl_c_in_any_command_exits_130_with_one_line(monkeypatch, tmp_path, capsys):
    """Commands without their own Ctrl-C handling (replay over a long file, list, check) end like play does."""
    import gem_core.rollout.replay as replay

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(replay, "replay_episodes", interrupted)  # what gem replay calls, for any file
    stored = tmp_path / "episodes.jsonl"
    stored.write_text("")
    assert main(["replay", str(stored)]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "gem replay: interrupted"


def test_play_a_self_play_game_against_random_seats():
    """`gem play multi:TicTacToe-v0`: the person takes seat x, seat o moves at random, the game ends."""
    # Every cell in order: occupied ones are answered with the format penalty and a retry, so the game always ends.
    moves = "".join(f"\\boxed{{{cell}}}\n" for cell in [5, 1, 2, 3, 4, 6, 7, 8, 9] * 3)
    done = subprocess.run([sys.executable, "-m", "gem_core.cli", "play", "multi:TicTacToe-v0", "--seed", "0", "--seat", "x"],
                          input=moves, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "You play seat 'x'" in done.stdout and "Game over after" in done.stdout
    assert "Input ended" not in done.stdout


def test_play_names_the_seats_of_a_self_play_game(capsys):
    assert main(["play", "multi:TicTacToe-v0", "--seat", "z"]) == 2
    assert "choose one of x, o" in capsys.readouterr().err


@pytest.mark.parametrize("env_kwargs", ["[1]", "{not json", "[" * 100_000, "{\"a\": " + "9" * 5000 + "}"])
def test_replay_with_env_kwargs_that_are_no_json_object_exits_2_naming_the_option(tmp_path, capsys, env_kwargs):
    stored = tmp_path / "episodes.jsonl"
    stored.write_text("")
    assert main(["replay", str(stored), "--env-kwargs", env_kwargs]) == 2
    assert "--env-kwargs" in capsys.readouterr().err


def test_ctrl_c_while_the_commands_load_exits_130_with_one_line(monkeypatch, capsys):
    """Building the parser imports every command's module (about a second): a Ctrl-C then printed a
    KeyboardInterrupt traceback and the process died of SIGINT, where one a moment later exited 130 quietly."""
    import gem_core.cli.command as command

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "build_parser", interrupted)
    assert main(["list"]) == 130
    assert capsys.readouterr().err.strip() == "gem: interrupted"


def _changed_trajectory_file(path):
    """A trajectory file of two episodes whose first stored reward the env no longer gives (replay: exit 1)."""
    from gem_core import make
    from gem_core.rollout.trajectory import TokenTrajectory
    from gem_core.rollout.trajectory_io import write_trajectories

    env = make("game:GuessTheNumber-v0")
    env.reset(seed=3)
    actions = ["\\boxed{5}", "\\boxed{7}"]
    rewards = [float(env.step(a)[1]) for a in actions]
    rewards[0] += 0.5
    trajectory = TokenTrajectory(prompt_ids=[1], response_ids=[5, 6], loss_mask=[1, 1], logprobs=[0.0] * 2,
                                 turn_spans=[(0, 1), (1, 2)], rewards=rewards, terminated=False, truncated=False,
                                 env_id="game:GuessTheNumber-v0", seed=3, actions=actions)
    write_trajectories(str(path), [trajectory, trajectory])


def test_replay_of_a_pipe_reads_it_once_and_a_fifo_without_a_writer_is_refused(tmp_path):
    """`cat f | gem replay /dev/stdin`: the first record was read to tell an eval run from a trajectory file,
    then the path opened again found the pipe drained: 0 episodes, exit 0 ("nothing changed")."""
    import os

    stored = tmp_path / "traj.jsonl"
    _changed_trajectory_file(stored)
    command = [sys.executable, "-m", "gem_core.cli", "replay"]
    done = subprocess.run([*command, "/dev/stdin"], input=stored.read_text(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1] == "2 episodes replayed, 2 turns changed."
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = subprocess.run([*command, str(fifo)], capture_output=True, text=True, timeout=60)  # no writer: no hang
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no input" in done.stderr, done.stderr


def test_replay_whose_output_cannot_be_written_exits_4_not_the_code_for_a_changed_reward(tmp_path):
    stored = tmp_path / "traj.jsonl"
    _changed_trajectory_file(stored)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gem_core.cli", "replay", str(stored)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    assert done.stderr == "gem replay: cannot write output: No space left on device\n"


@pytest.mark.parametrize("seed", ["9223372036854775808", "-1", "x"])
def test_a_seed_out_of_range_is_a_one_line_usage_error(seed, tmp_path):
    done = _gem("play", "game:Wordle-v0", "--seed", seed, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--seed" in done.stderr and "usage:" not in done.stderr, done.stderr
