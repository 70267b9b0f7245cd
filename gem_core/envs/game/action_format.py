"""The one action convention of the game suite: the move goes in ``\\boxed{...}``.

Models write reasoning around their move; the last complete ``\\boxed{...}`` is the move, so a model
may think out loud (and even quote the format) before committing.
"""

from __future__ import annotations

import re

__all__ = ["extract_boxed", "read_number", "BOXED_HINT"]

BOXED_HINT = "Put your move inside \\boxed{}, for example \\boxed{%s}."
r"""The instruction games append to ask for a move in ``\boxed{}``; ``%s`` is an example move."""
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"[0-9]{1,50}")
_SIGNED_NUMBER = re.compile(r"[+-]?[0-9]{1,50}")


def extract_boxed(text: object) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, stripped, or ``None`` if there is none (or
    ``text`` is not a str: a move that is not text is malformed like one without a box, never an exception)."""
    if not isinstance(text, str):
        return None
    matches = _BOXED.findall(text)
    return matches[-1].strip() if matches else None


def read_number(move: str | None, *, signed: bool = False) -> int | None:
    """``move`` (a box's content) as a whole number, or ``None`` unless it is one written in at most 50 ASCII
    digits (after a ``+`` or ``-`` when ``signed``). ``str.isdigit`` also takes superscripts and circled digits,
    which ``int`` refuses with a ValueError, ``int`` takes other scripts' digits and ``1_0``, and refuses more
    than 4300 digits: a move is a number only in the spelling the prompt shows, and no spelling raises."""
    pattern = _SIGNED_NUMBER if signed else _NUMBER
    return int(move) if move is not None and pattern.fullmatch(move) else None
