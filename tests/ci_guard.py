"""The one "skip here, fail in CI" rule of the suite: a test whose machine lacks something (bubblewrap,
a sandbox mode) is skipped on a developer's machine, but fails in CI (``CI=true``), so a suite cannot
pass there with its hostile or isolation tests unrun."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "skip_unless_ci"]


def in_ci() -> bool:
    """Whether the suite runs in CI (``$CI`` set to 1, true or yes, as CI services set it)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_unless_ci(reason: str) -> NoReturn:
    """Skip the calling test for ``reason``; in CI, fail it with the same reason instead."""
    if in_ci():
        pytest.fail(reason)
    pytest.skip(reason)
