"""The one "skip here, fail in CI" rule of the suite: a test whose machine lacks something (bubblewrap,
a sandbox mode) is skipped on a developer's machine, but fails in CI (``CI=true``), so a suite cannot
pass there with its hostile or isolation tests unrun."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import pytest

__all__ = ["in_ci", "module_needs", "needs", "skip_unless_ci"]

Test = TypeVar("Test", bound=Callable[..., Any])


def in_ci() -> bool:
    """Whether the suite runs in CI (``$CI`` set to 1, true or yes, as CI services set it)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_unless_ci(reason: str) -> NoReturn:
    """Skip the calling test for ``reason``; in CI, fail it with the same reason instead."""
    if in_ci():
        pytest.fail(reason)
    pytest.skip(reason)


def needs(available: bool, reason: str) -> Callable[[Test], Test]:
    """Decorate a test that needs something a machine may lack: where ``available`` is false the test is
    :func:`skip_unless_ci`'d (skipped here, failed with ``reason`` in CI) instead of running."""

    def decorate(test: Test) -> Test:
        if available:
            return test

        @functools.wraps(test)  # pytest still sees the test's own parameters (its fixtures)
        def missing(*args: Any, **kwargs: Any) -> None:
            skip_unless_ci(reason)

        return missing  # type: ignore[return-value]

    return decorate


def module_needs(available: bool, reason: str) -> Callable[[], None]:
    """The same rule for every test of a module: assign the result to a module-level name
    (``_bubblewrap = module_needs("bwrap" in available_modes(), "...")``) and pytest runs it as an
    autouse fixture, so each test is skipped here, or failed in CI, where ``available`` is false."""

    @pytest.fixture(autouse=True)
    def _needs() -> None:
        if not available:
            skip_unless_ci(reason)

    return _needs
