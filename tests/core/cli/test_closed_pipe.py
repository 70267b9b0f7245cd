"""A reader that closes the pipe early (``gem list | head``) ends a gem command quietly: no BrokenPipeError
traceback, no "Exception ignored" line, exit status 1 (Python's own on EPIPE, as its docs' SIGPIPE note does).

The read end is closed before the command has written anything, so every write it makes (or the flush at
exit, for an output shorter than the buffer) meets a closed pipe: the test does not depend on timing."""

from __future__ import annotations

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
