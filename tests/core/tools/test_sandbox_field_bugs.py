"""Defects found in the field in the sandbox's process limit and timeout check, the Python tool's clipping and
the rubric's reward."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from gem_core.errors import InvalidArgument
from gem_core.judge.rubric import Criterion, Rubric
from gem_core.tools.python import _clip, format_sandbox_result
from gem_core.tools.sandbox import SandboxConfig, SandboxResult, arun_python, run_python

from test_sandbox_unprivileged import NOBODY, PROJECT_ROOT, SETPRIV, as_nobody  # noqa: F401 - a fixture

# ------------------------------------------------------------------------------ processes, run unprivileged

#: Run by an unprivileged user: how many children a snippet alone can start (each sleeps, so all are alive
#: at once), then whether a snippet can start a thread while 16 other calls sleep.
UNPRIVILEGED_PROBE = r'''
import concurrent.futures, json, os, time
from gem_core.tools.sandbox import run_python
forks = """
import os, time
started = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        started += 1
except OSError:
    pass
print(started)
"""
thread = "import threading\nt = threading.Thread(target=print, args=('thread ran',)); t.start(); t.join()"
run_python("pass", mode="bwrap")
alone = run_python(forks, timeout=20, mode="bwrap")
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    sleepers = [pool.submit(run_python, "import time; time.sleep(4)", timeout=20, mode="bwrap") for _ in range(16)]
    time.sleep(2)
    loaded = run_python(thread, timeout=20, mode="bwrap")
    [f.result() for f in sleepers]
print(json.dumps({"uid": os.geteuid(), "children": alone.stdout.strip(), "thread": loaded.stdout.strip(),
                  "thread_limit": loaded.limit, "thread_stderr": loaded.stderr[-500:]}))
'''


@pytest.fixture(scope="module")
def unprivileged_probe(request, bwrap_mode):
    """What :data:`UNPRIVILEGED_PROBE` found, run as uid 65534 (or as this user when the suite runs unprivileged)."""
    root = os.geteuid() == 0
    prefix = [*request.getfixturevalue("as_nobody"), *SETPRIV] if root else []
    home = tempfile.mkdtemp(prefix="gem-nobody-home-")
    if root:
        os.chown(home, NOBODY, NOBODY)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "PYTHONPATH": str(PROJECT_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", UNPRIVILEGED_PROBE], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["uid"] != 0
    return found


def test_an_unprivileged_snippet_alone_can_start_its_processes(unprivileged_probe):
    """Unprivileged, every call of the zygote shares one uid and RLIMIT_NPROC was set to max_processes for all
    of them: the zygote and the calls waiting in the pool used part of it, so a snippet alone could start only
    ~18 of its 31 children. A fork bomb must still be bounded (the pool's waiting calls are all the extra)."""
    config = SandboxConfig()
    children = int(unprivileged_probe["children"])
    assert config.max_processes - 4 <= children <= config.max_processes + 2 * config.pool_size + 8, unprivileged_probe


def test_an_unprivileged_snippet_can_start_a_thread_while_other_calls_sleep(unprivileged_probe):
    """With 16 other calls merely sleeping, the shared RLIMIT_NPROC was used up: a correct snippet failed with
    "can't start new thread" and limit="processes"."""
    assert unprivileged_probe["thread"] == "thread ran", unprivileged_probe
    assert unprivileged_probe["thread_limit"] is None

# ------------------------------------------------------------------------------ timeout checks

BAD_TIMEOUTS = [float("nan"), float("inf"), -1.0, 0, "5", None, True]


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_a_bad_timeout_is_an_invalid_argument(timeout):
    """Only ``timeout <= 0`` was checked: NaN, inf, a string or None escaped as a raw ValueError (math.ceil of
    NaN), OverflowError (of inf) or TypeError (comparing a str or None with 0), not InvalidArgument."""
    with pytest.raises(InvalidArgument, match="timeout"):
        run_python("print(1)", timeout=timeout, mode="process")


@pytest.mark.parametrize("timeout", [float("nan"), "5"], ids=repr)
def test_a_bad_timeout_is_an_invalid_argument_for_async_callers_too(timeout):
    """The async entry point waited in a thread and re-raised the same raw ValueError / TypeError."""

    async def main() -> None:
        with pytest.raises(InvalidArgument, match="timeout"):
            await asyncio.wait_for(arun_python("print(1)", timeout=timeout, mode="process"), 30)

    asyncio.run(main())


# ------------------------------------------------------------------------------ the Python tool's clip


def test_a_clip_to_one_character_does_not_keep_the_whole_text():
    """With limit 1 half was 0 and ``text[-0:]`` is the whole text: all of it came back, under a note saying
    it had been cut."""
    text = "x" * 100_000
    assert len(_clip(text, 1)) < 100
    assert len(_clip(text, 3)) < 100 and _clip(text, 3).startswith("x\n") and _clip(text, 3).endswith("\nx")
    result = SandboxResult(text, "e" * 100_000, 1, False, None, "bwrap", 0.1)
    assert len(format_sandbox_result(result, timeout=5, memory_mb=512, max_chars=1)) < 1000


# ------------------------------------------------------------------------------ the rubric's reward

HUGE_AND_TINY = [
    ((1e308,), (0, 10), (10,), 1.0),
    ((1e306,), (0, 1000), (1000,), 1.0),
    ((1e308, 1.0), (0, 10), (10, 0), 1e308 / (1e308 + 1.0)),
    ((1e308, 1e308 / 3), (0, 10), (10, 10), 1.0),
    ((5e-324,), (0, 10), (5,), 0.5),
    ((5e-324, 5e-324), (-3, 3), (3, 0), 0.75),
]


@pytest.mark.parametrize(("weights", "scale", "scores", "expected"), HUGE_AND_TINY)
def test_the_reward_stays_in_0_1_for_huge_and_tiny_weights(weights, scale, scores, expected):
    """``weight * (score - low)`` was computed before the division: a weight of 1e308 gave inf for a perfect
    score, and a subnormal weight underflowed to a reward of 0.0 where 0.5 was right."""
    rubric = Rubric(tuple(Criterion(f"c{i}", "d", w) for i, w in enumerate(weights)), scale=scale)
    reward = rubric.reward({f"c{i}": s for i, s in enumerate(scores)})
    assert math.isfinite(reward) and 0.0 <= reward <= 1.0
    assert reward == pytest.approx(expected, abs=1e-12)
