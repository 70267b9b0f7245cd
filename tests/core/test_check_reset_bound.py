"""check_env returns on an env whose reset never does, naming the reset and the option that sets the limit."""

from __future__ import annotations

import threading

import pytest
from test_check import Coin  # the well-behaved one-turn env of the checker's own tests

from gem_core.check import check_env
from gem_core.cli import main

RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def release_hung_resets():
    """Every reset this module's envs hang in returns once the test ends, so no thread outlives it."""
    RELEASE.clear()
    yield
    RELEASE.set()


class ResetHangs(Coin):
    """Loads something that never arrives: every reset waits until the test releases it (at most 30 s)."""

    max_step_seconds = 0.05  # under the step limit below, which then applies as given

    def reset(self, *, seed=None, options=None):
        RELEASE.wait(30)
        return super().reset(seed=seed, options=options)


def run_check(make_env, **kwargs) -> list:
    done: list = []
    worker = threading.Thread(target=lambda: done.append(check_env(make_env, **kwargs)), daemon=True)
    worker.start()
    worker.join(15)
    assert done, "check_env did not return within 15 s"
    return done[0]


def test_a_reset_that_never_returns_fails_every_check_within_the_limit():
    """Before the fix check_env(step_limit=0.2) on this env was still running after 15 s: steps ran within the limit,
    but every check called env.reset directly and waited for ever."""
    found = {r.name: (r.ok, r.message) for r in run_check(ResetHangs, step_limit=0.2)}
    for name in ("gymnasium", "determinism", "hostile actions"):
        ok, message = found[name]
        assert not ok and "reset did not return within 0.2 s" in message and "step_limit" in message, (name, message)


class SecondResetHangs(Coin):
    """Its first reset answers, later ones hang: the check's later resets are bounded too."""

    max_step_seconds = 0.05

    def reset(self, *, seed=None, options=None):
        if getattr(self, "was_reset", False):
            RELEASE.wait(30)
        self.was_reset = True
        return super().reset(seed=seed, options=options)


def test_a_later_reset_that_never_returns_is_bounded_too():
    """The hostile check resets before each action: one hanging there fails it within the limit too."""
    found = {r.name: (r.ok, r.message) for r in run_check(SecondResetHangs, step_limit=0.2)}
    ok, message = found["hostile actions"]
    assert not ok and "reset did not return within 0.2 s" in message, message


def test_gem_check_names_the_option_that_sets_the_limit(monkeypatch, capsys):
    """The command's report says which flag raises the limit a slow reset ran past."""
    from gem_core import registry

    registry.register("user:ResetHangs-v0", ResetHangs)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(main(["check", "user:ResetHangs-v0", "--step-limit", "0.2"])), daemon=True)
    worker.start()
    worker.join(15)
    assert done, "gem check did not return within 15 s"
    out = capsys.readouterr().out
    assert done[0] == 1 and "reset did not return within 0.2 s" in out and "--step-limit" in out, out
