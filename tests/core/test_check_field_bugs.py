"""check_env refuses seeds it cannot replay, and returns on an env whose step never does."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_check import Coin  # the well-behaved one-turn env of the checker's own tests

from gem_core.check import check_env
from gem_core.errors import InvalidArgument


@pytest.mark.parametrize("seeds", [(), (-1,), "01", (None,), (1.5,), 7, None], ids=repr)
def test_seeds_that_replay_nothing_or_no_episode_are_refused(seeds):
    """Before the fix seeds=() reported determinism PASSED having replayed nothing, and seeds=(-1,) or "01" FAILED
    a correct env ("playing seed -1 raised InvalidArgument"), blaming the env for the caller's argument."""
    with pytest.raises(InvalidArgument, match="seeds"):
        check_env(Coin, seeds=seeds)


def test_numpy_seeds_are_seeds():
    """A seed drawn with numpy is a whole number like any other (check_seed converts it)."""
    found = {r.name: r.ok for r in check_env(Coin, seeds=[np.int64(3)])}
    assert found == {"gymnasium": True, "determinism": True, "hostile actions": True}


RELEASE = threading.Event()


class Hangs(Coin):
    """A grader that never answers: every step waits until the test releases it (at most 30 s)."""

    max_step_seconds = 0.05  # under the step limit below, which then applies as given

    def step(self, action):
        RELEASE.wait(30)
        return super().step(action)


def test_a_step_that_never_returns_fails_every_check_within_the_limit():
    """Before the fix check_env(step_limit=1.0) on this env was still running after 30 s: only the hostile steps were
    time-bounded; gymnasium's checker and the determinism replay called env.step directly and waited for ever."""
    done: list = []
    worker = threading.Thread(target=lambda: done.append(check_env(Hangs, step_limit=0.2)), daemon=True)
    try:
        worker.start()
        worker.join(15)
    finally:
        RELEASE.set()
    assert done, "check_env did not return within 15 s"
    found = {r.name: (r.ok, r.message) for r in done[0]}
    for name in ("gymnasium", "determinism", "hostile actions"):
        ok, message = found[name]
        assert not ok and "did not return within 0.2 s" in message, (name, message)
