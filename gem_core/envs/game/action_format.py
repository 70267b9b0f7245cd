"""The one action convention of the game suite: the move goes in ``\\boxed{...}``.

Models write reasoning around their move; the last complete ``\\boxed{...}`` is the move, so a model
may think out loud (and even quote the format) before committing.
"""

from __future__ import annotations

import re

__all__ = ["extract_boxed", "BOXED_HINT"]

BOXED_HINT = "Put your move inside \\boxed{}, for example \\boxed{%s}."
r"""The instruction games append to ask for a move in ``\boxed{}``; ``%s`` is an example move."""
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def extract_boxed(text: object) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, stripped, or ``None`` if there is none (or
    ``text`` is not a str: a move that is not text is malformed like one without a box, never an exception)."""
    if not isinstance(text, str):
        return None
    matches = _BOXED.findall(text)
    return matches[-1].strip() if matches else None
