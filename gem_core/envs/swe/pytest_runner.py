"""The grader's program inside the sandbox: run the listed test ids with pytest, return each one's outcome.

This file is never imported by the host: :mod:`.grading` sends its source as the sandbox snippet and
calls :func:`run_tests` through the sandbox's function-call channel (:class:`~gem_core.tools.sandbox.FunctionCall`),
so the verdict reaches the host as the call's return value, through the worker's supervisor, not as
text on stdout the tested code could print. Code that exits early (``os._exit(0)`` at import) returns
nothing, and every test then counts as failed. It uses the standard library and pytest only.

pytest runs in this process, isolated from what the tree could say about how to test it: no
configuration file of the tree (``-c /dev/null``), no ``conftest.py`` (``--noconftest``), no plugins
from entry points (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), no cache, and the interpreter itself started
with ``-I -S`` by the sandbox (no ``sitecustomize``, ``.pth`` files or user site).
"""

import os
import sys


class _Outcomes:
    """A pytest plugin that keeps the worst outcome of each test id: any failed phase or subtest fails it."""

    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        before = self.outcomes.get(report.nodeid)
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif before is None and report.skipped:
            self.outcomes[report.nodeid] = "skipped"
        elif before is None and report.when == "call" and report.passed:
            self.outcomes[report.nodeid] = "passed"


def run_tests(request):
    """Run ``request["ids"]`` from ``request["root"]`` with ``request["python_path"]`` on ``sys.path``;
    ``{"outcomes": {id: "passed"|"failed"|"skipped"}, "exit": pytest's exit code}``. An id pytest never
    ran (deleted, not collected) is absent."""
    root = request["root"]
    os.chdir(root)
    for entry in reversed(request["python_path"]):
        sys.path.insert(0, os.path.normpath(os.path.join(root, entry)))
    # This interpreter's environment is the sandbox's own (nothing of the host's); set, not read.
    os.environ.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    os.environ.pop("PYTEST_ADDOPTS", None)
    import pytest

    plugin = _Outcomes()
    arguments = [
        "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--noconftest", "-c", os.devnull,
        "--rootdir", root, "--tb", request.get("tb", "no"), "-W", "ignore::DeprecationWarning", *request["ids"],
    ]
    code = pytest.main(arguments, plugins=[plugin])
    return {"outcomes": dict(plugin.outcomes), "exit": int(code)}
