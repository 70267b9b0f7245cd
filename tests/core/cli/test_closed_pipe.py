"""A reader that closes the pipe early (``gem list | head``) ends a gem command quietly: no BrokenPipeError
traceback, no "Exception ignored" line, exit status 1 (Python's own on EPIPE, as its docs' SIGPIPE note does).

The read end is closed before the command has written anything, so every write it makes (or the flush at
exit, for an output shorter than the buffer) meets a closed pipe: the test does not depend on timing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "game:Wordle*"],
        ["list", "--aliases"],
        ["play", "game:GuessTheNumber-v0", "--seed", "0"],  # the first observation, before any input is read
    ],
)
def test_a_closed_stdout_ends_the_command_without_a_traceback(argv):
    proc = subprocess.Popen([sys.executable, "-m", "gem_core.cli", *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first write
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert err == ""
    assert proc.returncode == 1


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--ids"],
        ["list"],
        ["play", "game:GuessTheNumber-v0", "--seed", "0"],
    ],
)
def test_an_unwritable_stdout_is_one_line_on_stderr_not_a_traceback(argv):
    """A full disk (``> /dev/full``) fails every write with ENOSPC, an OSError that is not a BrokenPipeError."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gem_core.cli", *argv], stdin=subprocess.DEVNULL, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.startswith("gem: cannot write output: ") and done.stderr.count("\n") == 1, done.stderr
    assert done.returncode == 1


def test_an_os_error_that_is_not_about_stdout_is_not_reported_as_one(capsys):
    from gem_core.cli.options import run_until_pipe_closes

    def fails() -> int:
        raise PermissionError(13, "Permission denied", "/root/secret")

    with pytest.raises(PermissionError):
        run_until_pipe_closes(fails)
    assert "cannot write output" not in capsys.readouterr().err
