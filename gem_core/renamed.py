"""Old names of user-facing arguments, kept working for a while with a warning that names the new one.

One name per setting across the core and the adapters (the per-turn token cap is ``max_new_tokens``,
as in :class:`gem_core.rollout.SamplingParams` and ``transformers``' ``generate``); an adapter that used
another name accepts it through :func:`renamed_argument` so a user's config keeps running and says what
to change.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

__all__ = ["renamed_argument"]

T = TypeVar("T")


def renamed_argument(owner: str, old: str, new: str, old_value: Any, new_value: T, *, new_default: Any = None) -> T:
    """``new_value``, or ``old_value`` when the caller used the old name (with a ``FutureWarning``:
    shown to end users by default, unlike ``DeprecationWarning``).

    Args:
        owner: what the argument belongs to, for the messages (``"GemRolloutFunc"``).
        old, new: the old and the current name.
        old_value: what was passed under the old name (None: not passed).
        new_value: what was passed under the new name (``new_default`` if not passed).

    Raises:
        TypeError: both names were given.
    """
    if old_value is None:
        return new_value
    if new_value != new_default:
        raise TypeError(f"{owner}: got both {old}={old_value!r} and {new}={new_value!r}; pass only {new} ({old} is its old name).")
    warnings.warn(f"{owner}: {old} is renamed {new} (same meaning); {old} will be removed.", FutureWarning, stacklevel=3)
    return old_value
