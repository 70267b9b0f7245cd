"""Runs an agent program, and ends its whole process group once the process that started it is gone.

An agent runs in a session of its own (so a limit kills it with every process it started), which also puts it out
of reach of what ends its trainer: a trainer killed by the OOM killer, SIGKILL or a lost node left every agent of its
batch running, and the tests and shells those had started. This guard sits between the two: Linux's parent-death
signal (``PR_SET_PDEATHSIG``) tells it when the thread that started it has gone, and it kills its group.

Run as ``python -I -S orphan_guard.py PARENT_PID PROGRAM [ARGS...]``, it imports nothing but the standard library
(the agent's environment may point ``PYTHONPATH`` anywhere). It exits as the program did: with its status, or by
the same signal. Elsewhere than Linux it only runs the program.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _end_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> None:
    parent, program = int(argv[0]), argv[1:]
    signal.signal(signal.SIGTERM, _end_group)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (AttributeError, OSError):  # no prctl: not Linux
        pass
    if os.getppid() != parent:  # gone before the signal was set up
        _end_group()
    child = os.fork()
    if child == 0:
        # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: the program gets
        # them as subprocess gives them (``restore_signals``), so `yes | head` in its shell ends as it should.
        for number in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        try:
            os.execvp(program[0], program)
        except OSError as exc:
            os.write(2, f"gem agent: cannot run {program[0]!r}: {exc}\n".encode(errors="replace"))
        os._exit(127)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: so is the guard, so the trainer reads the same status
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
