"""Ctrl-C in the first moments of ``gem``: while Python imports the console script's module and GEM itself.

A later Ctrl-C (a command's own work, the commands loading) already exited 130 with one line; one during
``import gem_core``, the first 0.2-0.9 s of every ``gem`` run, printed a KeyboardInterrupt traceback. The
console script is run as pip writes it (``from MODULE import FUNC; sys.exit(FUNC())``), from the entry
point the installed metadata names.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points

import pytest

_ENTRY = next(iter(entry_points(group="console_scripts", name="gem")))
#: What pip's generated ``gem`` script runs.
CONSOLE_SCRIPT = f"import sys\nfrom {_ENTRY.module} import {_ENTRY.attr}\nsys.exit({_ENTRY.attr}())\n"

#: Sends this process SIGINT as the named module starts importing: the interrupt lands inside that import, exactly.
_SIGINT_AT_IMPORT = """
import os, signal, sys
class _CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, _CtrlC())
"""

#: Sends this process SIGINT as numpy's C code imports ``datetime`` (``PyCapsule_Import``): that code turns the
#: KeyboardInterrupt into ``ImportError: PyCapsule_Import could not import module "datetime"``, and numpy
#: wraps that in its own ImportError, so no KeyboardInterrupt reaches ``gem``'s main.
_SIGINT_IN_NUMPY_C_IMPORT = """
import os, signal, sys
class _CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "datetime" and "numpy" in sys.modules:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, _CtrlC())
"""


def _as_at_a_terminal() -> None:
    """In the child before it runs: SIGINT's default action, as under a terminal. A job a shell started in the
    background without job control (CI's runner) ignores SIGINT, its children inherit that, and Python then installs
    no handler: the interrupt these tests send would be ignored, not caught."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _outcome(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return proc.returncode, err


def _assert_quiet_130(returncode: int, err: str, when: str) -> None:
    """Exit 130 and at most one line; or killed by the SIGINT itself with nothing said, which a shell reports as 130
    too: a Ctrl-C while the interpreter shuts down, after ``gem`` is done (Python gives SIGINT back its default action
    then; CI's loaded machine moved the end of a quick ``gem list`` onto the moment of the signal)."""
    own = [line for line in err.splitlines() if line.strip() and not line.startswith("import time:")]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, f"{when}:\n{err[-3000:]}"
    assert returncode == 130 or (returncode == -signal.SIGINT and not own), f"{when}: exit {returncode}\n{err[-3000:]}"
    assert len(own) <= 1, f"{when}: {own}"


#: Sends this process SIGINT from a finalizer that runs while ``gem_core.cli.command`` starts importing: the
#: KeyboardInterrupt is raised where Python cannot deliver it (it prints "Exception ignored in ..." and goes on), as a
#: Ctrl-C landing in one of importlib's module-lock callbacks did on CI.
_SIGINT_IN_A_FINALIZER = """
import gc, os, signal, sys
class _Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
class _CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "gem_core.cli.command":
            sys.meta_path.remove(self)
            _Finalized()
        return None
sys.meta_path.insert(0, _CtrlC())
"""


def test_ctrl_c_inside_a_finalizer_while_gem_loads_prints_no_traceback(tmp_path):
    code = _SIGINT_IN_A_FINALIZER + CONSOLE_SCRIPT
    proc = subprocess.Popen([sys.executable, "-c", code, "list", "--ids"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, preexec_fn=_as_at_a_terminal)
    _assert_quiet_130(*_outcome(proc), "SIGINT in a finalizer while gem loads")


@pytest.mark.parametrize("module", ["gem_core.cli.command", "gem_core.env", "numpy", "gymnasium", "gem_core.registry", "gem_core.serve.command"])
def test_ctrl_c_while_gem_imports_itself_exits_130_with_at_most_one_line(module, tmp_path):
    code = _SIGINT_AT_IMPORT.format(module=module) + CONSOLE_SCRIPT
    proc = subprocess.Popen([sys.executable, "-c", code, "list", "--ids"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, preexec_fn=_as_at_a_terminal)
    _assert_quiet_130(*_outcome(proc), f"SIGINT while importing {module}")


def test_ctrl_c_that_numpy_turns_into_an_import_error_exits_130_with_at_most_one_line(tmp_path):
    code = _SIGINT_IN_NUMPY_C_IMPORT + CONSOLE_SCRIPT
    proc = subprocess.Popen([sys.executable, "-c", code, "list", "--ids"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, preexec_fn=_as_at_a_terminal)
    _assert_quiet_130(*_outcome(proc), "SIGINT while numpy's C code imports datetime")


def test_an_import_error_without_a_ctrl_c_is_still_reported(tmp_path):
    # Only an import failure that follows a Ctrl-C is taken for one: a broken install still says what broke.
    code = "import sys\nsys.modules['numpy'] = None\n" + CONSOLE_SCRIPT
    result = subprocess.run([sys.executable, "-c", code, "list", "--ids"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=60, preexec_fn=_as_at_a_terminal)
    assert result.returncode == 1 and "ModuleNotFoundError" in result.stderr, (result.returncode, result.stderr[-3000:])


@pytest.mark.parametrize("delay", [0.05, 0.1, 0.2, 0.4])
def test_ctrl_c_in_the_first_moments_of_gem_exits_130_with_at_most_one_line(delay, tmp_path):
    """A real SIGINT at several moments after Python's own start-up (``site``, which GEM cannot guard:
    ``-X importtime`` says when it is over) has finished."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-c", CONSOLE_SCRIPT, "list", "--ids"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path, preexec_fn=_as_at_a_terminal)
    err = ""
    try:
        while not err.rstrip().endswith("| site"):
            line = proc.stderr.readline()
            assert line, f"no start-up seen:\n{err[-3000:]}"
            err += line
        time.sleep(delay)
        finished = proc.poll() is not None  # a fast machine: gem list was over before the moment came
        if not finished:
            os.kill(proc.pid, signal.SIGINT)
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    returncode, rest = _outcome(proc)
    if finished:
        assert returncode == 0 and "Traceback" not in err + rest, (returncode, (err + rest)[-3000:])
        return
    _assert_quiet_130(returncode, err + rest, f"SIGINT {delay} s after start-up")
