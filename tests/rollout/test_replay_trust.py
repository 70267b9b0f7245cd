"""`gem replay` treats a trajectory file as data (issue 27.1): the file never picks a sandbox mode, a URL,
a module to import or an allocation size; such settings come from the command line or are refused,
naming the field. The attacks run through the real CLI, as a user who was sent the file would run it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from request_listener import RequestListener

from gem_core.cli import main

# The smallest record TokenTrajectory accepts for one turn; each test sets env_id, env_kwargs and actions.
ONE_TURN = {
    "format": "gem.trajectory/1",
    "prompt_ids": [1],
    "response_ids": [2],
    "loss_mask": [1],
    "logprobs": [0.0],
    "turn_spans": [[0, 1]],
    "rewards": [0.0],
    "terminated": True,
    "truncated": False,
    "seed": 0,
}


def _write(path, **fields):
    path.write_text(json.dumps({**ONE_TURN, **fields}) + "\n")
    return path


def _gem(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gem_core.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "action"),
    [
        ("code:Sample", {"sandbox_mode": "process"}, "```python\nopen({marker!r}, 'w').write('x')\n```"),
        ("terminal:Tasks-v0", {"sandbox": "process"}, "```bash\ntouch {marker}\n```"),
    ],
)
def test_gem_replay_refuses_a_file_whose_env_kwargs_choose_the_unsandboxed_mode(tmp_path, env_id, env_kwargs, action):
    marker = tmp_path / "MARKER"
    stored = _write(tmp_path / "shared.jsonl", env_id=env_id, env_kwargs=env_kwargs, actions=[action.format(marker=str(marker))])
    done = _gem("replay", str(stored), cwd=tmp_path)
    assert not marker.exists(), "the file's action ran outside the sandbox"
    key = next(iter(env_kwargs))
    assert done.returncode == 2, done.stdout + done.stderr
    assert key in done.stderr and "--env-kwargs" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_gem_replay_refuses_a_remote_env_id_from_the_file_and_sends_nothing(tmp_path):
    with RequestListener() as listener:
        stored = _write(tmp_path / "shared.jsonl", env_id=f"remote:{listener.url}/game:GuessTheNumber-v0", actions=["\\boxed{5}"])
        done = _gem("replay", str(stored), cwd=tmp_path)
    assert listener.requests == []
    assert done.returncode == 2 and "env_id" in done.stderr and "--env-id" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_gem_replay_refuses_a_verifiers_env_id_from_the_file_and_imports_nothing(tmp_path):
    """``verifiers:<module>`` imports the module it names, and ``python -m`` puts the working folder first on the
    path: a shared folder holding the file and an ``evil.py`` ran that code (where verifiers is installed)."""
    marker = tmp_path / "MARKER"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    stored = _write(tmp_path / "shared.jsonl", env_id="verifiers:evil", actions=["\\boxed{5}"])
    done = _gem("replay", str(stored), cwd=tmp_path)
    assert not marker.exists(), "the module the file named was imported"
    assert done.returncode == 2 and "env_id" in done.stderr and "--env-id" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("env_kwargs", "field"),
    [
        ({"search_url": "http://127.0.0.1:1/retrieve"}, "search_url"),  # a URL
        ({"game": "os:system", "levels": [{}]}, "game"),  # RandomDifficulty imports `game`
        ({"dataset_path": "/etc"}, "dataset_path"),  # a file to read
        ({"timeout": 1e9}, "timeout"),  # a limit that keeps a step bounded
        ({"size": 10**9}, "size"),  # an allowed knob, but a board of 10**18 cells
        ({"max_number": {"nested": [1]}}, "max_number"),  # plain-data knob with a non-scalar value
    ],
)
def test_file_env_kwargs_outside_the_plain_data_allow_list_are_refused_naming_the_field(tmp_path, capsys, env_kwargs, field):
    stored = _write(tmp_path / "shared.jsonl", env_id="game:GuessTheNumber-v0", env_kwargs=env_kwargs, actions=["\\boxed{5}"])
    assert main(["replay", str(stored)]) == 2
    err = capsys.readouterr().err
    assert field in err and "--env-kwargs" in err, err


def test_plain_data_env_kwargs_in_the_file_are_used(tmp_path, capsys):
    # With max_number=3 the first guess of 2 is "higher" or "lower" or right; with the default range (1..20)
    # the stored reward is computed against the same kwargs, so an unchanged replay proves they were used.
    import gem_core

    env = gem_core.make("game:GuessTheNumber-v0", min_number=1, max_number=3)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step("\\boxed{2}")
    stored = _write(
        tmp_path / "own.jsonl",
        env_id="game:GuessTheNumber-v0",
        env_kwargs={"min_number": 1, "max_number": 3},
        actions=["\\boxed{2}"],
        rewards=[float(reward)],
        terminated=bool(terminated),
        truncated=bool(truncated),
    )
    assert main(["replay", str(stored)]) == 0, capsys.readouterr().err
    assert "1 episodes replayed, 0 turns changed." in capsys.readouterr().out


def test_env_id_on_the_command_line_replaces_the_stored_remote_id(tmp_path, capsys):
    with RequestListener() as listener:
        stored = _write(tmp_path / "shared.jsonl", env_id=f"remote:{listener.url}/game:GuessTheNumber-v0", actions=["\\boxed{5}"])
        code = main(["replay", str(stored), "--env-id", "game:GuessTheNumber-v0"])
    assert listener.requests == []
    assert code in (0, 1), capsys.readouterr().err
    assert "1 episodes replayed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "line",
    [
        "[" * 100_000 + "]" * 100_000,  # nesting deeper than the parser's recursion
        json.dumps({**ONE_TURN, "env_id": 5, "actions": ["x"]}),  # env_id not a string
        json.dumps({**ONE_TURN, "env_id": "game:GuessTheNumber-v0", "seed": "zero", "actions": ["x"]}),
        json.dumps({**ONE_TURN, "env_id": "game:GuessTheNumber-v0", "actions": [{"a": 1}]}),
        json.dumps({**ONE_TURN, "env_id": "game:GuessTheNumber-v0", "env_kwargs": [1], "actions": ["x"]}),
    ],
)
def test_gem_replay_reports_a_malformed_record_in_one_line(tmp_path, line):
    stored = tmp_path / "bad.jsonl"
    stored.write_text(line + "\n")
    done = _gem("replay", str(stored), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("gem replay: ") and "bad.jsonl" in done.stderr, done.stderr


def test_a_line_longer_than_the_limit_is_refused_before_it_is_parsed(tmp_path):
    from gem_core.rollout.trajectory_io import read_records

    stored = tmp_path / "long.jsonl"
    stored.write_text(json.dumps({**ONE_TURN, "actions": ["x" * 5000]}) + "\n")
    with pytest.raises(ValueError, match="longer than 1000 bytes"):
        list(read_records(stored, max_line_bytes=1000))
