"""gem_core.cli.options' shared checks: folder_problem, env_kwargs_option and the OneLineErrors parser the examples use."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gem_core.cli.options import OneLineErrors, env_kwargs_option, folder_problem
from gem_core.errors import InvalidArgument


class Parser(OneLineErrors, argparse.ArgumentParser):
    pass


def test_folder_problem_names_the_file_in_the_way(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    assert folder_problem(tmp_path / "new" / "deeper") is None and folder_problem(tmp_path) is None
    assert folder_problem(a_file) == f"{a_file} is a file, not a folder"
    assert folder_problem(a_file / "sub") == f"{a_file / 'sub'}: {a_file} is a file, not a folder"


@pytest.mark.parametrize(
    ("check", "line"),
    [
        (lambda p, f: p.require_counts({"--n": 3, "--gpus": 0}), "prog: error: --gpus must be at least 1, got 0"),
        (lambda p, f: p.require_env("game:Wordel-v0"), "prog: error: --env: No env registered as 'game:Wordel-v0'"),
        (lambda p, f: p.require_folder("--out", f), "prog: error: --out {f} is a file, not a folder: give a folder path"),
        (lambda p, f: p.parse_args(["--nope"]), "prog: error: unrecognized arguments: --nope (--help lists the options)"),
    ],
)
def test_a_failed_check_is_one_line_naming_the_option_and_exit_2(tmp_path, capsys, check, line):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    with pytest.raises(SystemExit) as ended:
        check(Parser(prog="prog"), a_file)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and err.startswith(line.format(f=a_file)), err


def test_checks_that_hold_say_nothing(tmp_path, capsys):
    parser = Parser(prog="prog")
    parser.require_counts({"--n": 1})
    parser.require_env("game:Wordle-v0")
    parser.require_folder("--out", tmp_path / "new")
    assert capsys.readouterr().err == ""


def _folder_problem_as_another_user(path) -> str | None:
    """:func:`folder_problem` as uid 65534 when run as root (root may write anywhere), in a forked child that
    drops to it; as this user otherwise."""
    import json
    import os

    if os.geteuid() != 0:
        return folder_problem(path)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, json.dumps(folder_problem(path)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def test_folder_problem_names_a_folder_the_user_cannot_write_in():
    """``--out`` under a folder the user may not write was accepted, and the run failed at its first log line,
    after the model was built and warmed up: it is refused before any work, naming the folder. A folder above it
    that may not be entered (``/root/runs`` for another user) raised ``PermissionError``."""
    import os
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gem-folder-problem-", dir="/tmp"))  # pytest's tmp_path: only root may enter
    closed = base / "closed"
    private = base / "private"
    try:
        os.chmod(base, 0o755)
        for folder, mode in ((closed, 0o555), (private, 0o700)):
            folder.mkdir()
            os.chmod(folder, mode)  # not mkdir's mode: the umask would narrow it
        (private / "runs").mkdir()
        assert _folder_problem_as_another_user(closed / "run") == f"{closed / 'run'}: cannot write in {closed}"
        assert _folder_problem_as_another_user(closed) == f"{closed}: cannot write in {closed}"
        assert _folder_problem_as_another_user(private / "runs" / "x") == f"{private / 'runs' / 'x'}: cannot write in {private}"
        os.chmod(closed, 0o777)
        assert _folder_problem_as_another_user(closed / "run" / "deeper") is None
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("[" * 100_000, "nested too deeply"), ('{"max_turns": ' + "9" * 5000 + "}", "Exceeds the limit (4300 digits)")],
    ids=["nested 100000 deep", "5000-digit number"],
)
def test_env_kwargs_python_cannot_read_are_refused_naming_the_option(text, reason):
    """json.loads raises RecursionError or a bare ValueError for these, not its JSONDecodeError."""
    with pytest.raises(InvalidArgument) as caught:
        env_kwargs_option(text, "--env_kwargs")
    message = str(caught.value)
    assert message.startswith(f"--env_kwargs is not JSON ({reason}") and "e.g. --env_kwargs '{\"max_turns\": 8}'" in message
    assert len(message) < 300


@pytest.mark.parametrize("text", ["-1", "9223372036854775808", "1.5"])
def test_seed_option_refuses_what_reset_refuses(text):
    from gem_core.cli.options import seed_option
    from gem_core.env import MAX_SEED

    with pytest.raises(argparse.ArgumentTypeError, match=f"0 to {MAX_SEED}"):
        seed_option(text)
    assert seed_option(str(MAX_SEED)) == MAX_SEED
