"""The one action convention of the game suite: the move goes in ``\\boxed{...}``.

Models write reasoning around their move; the last ``\\boxed{...}`` is the move, so a model may think
out loud (and even quote the format) before committing. Its content is read with balanced braces (models
write LaTeX: ``\\boxed{\\text{10}}``), and a last box that never closes is no move at all: falling back to
an earlier box would play one the model wrote and then rejected.
"""

from __future__ import annotations

import re

__all__ = ["extract_boxed", "read_number", "BOXED_HINT"]

BOXED_HINT = "Put your move inside \\boxed{}, for example \\boxed{%s}."
r"""The instruction games append to ask for a move in ``\boxed{}``; ``%s`` is an example move."""
_OPENER = "\\boxed{"
_BRACES = re.compile(r"[{}]")
#: A LaTeX wrapper around the whole move (``\text{10}``, ``\textbf{A C}``): its content is the move.
_WRAPPER = re.compile(r"\\(?:text|textbf|textit|texttt|mathrm|mathbf)\s*\{")
#: Wrappers unwrapped at most (``\textbf{\text{7}}`` is two); each costs a pass over the move, so a
#: hostile move nested thousands deep is not unwrapped in quadratic time (it stays malformed).
_MAX_WRAPPERS = 3
_NUMBER = re.compile(r"[0-9]{1,50}")
_SIGNED_NUMBER = re.compile(r"[+-]?[0-9]{1,50}")


def _closing_brace(text: str, start: int) -> int | None:
    """The index of the ``}`` that closes the brace opened just before ``start``, or None if none does."""
    depth = 1
    for brace in _BRACES.finditer(text, start):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return brace.start()
    return None


def extract_boxed(text: object) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, stripped and out of a whole-content ``\\text{}``
    (or ``\\textbf``, ``\\mathrm``, ...) wrapper; ``None`` if there is no box, the last one never closes, or
    ``text`` is not a str (a move that is not text is malformed like one without a box, never an exception)."""
    if not isinstance(text, str):
        return None
    opener = text.rfind(_OPENER)
    if opener < 0:
        return None
    start = opener + len(_OPENER)
    end = text.find("}", start)
    if end < 0:
        return None
    move = text[start:end]
    if "{" not in move:  # no brace inside: the common move, read without the scan (every game step)
        move = move.strip()
        if move[:1] != "\\":
            return move
    else:
        found = _closing_brace(text, start)
        if found is None:
            return None
        move = text[start:found].strip()
    for _ in range(_MAX_WRAPPERS):
        wrapper = _WRAPPER.match(move)
        if wrapper is None or _closing_brace(move, wrapper.end()) != len(move) - 1:
            break
        move = move[wrapper.end() : -1].strip()
    return move


def read_number(move: str | None, *, signed: bool = False) -> int | None:
    """``move`` (a box's content) as a whole number, or ``None`` unless it is one written in at most 50 ASCII
    digits (after a ``+`` or ``-`` when ``signed``). ``str.isdigit`` also takes superscripts and circled digits,
    which ``int`` refuses with a ValueError, ``int`` takes other scripts' digits and ``1_0``, and refuses more
    than 4300 digits: a move is a number only in the spelling the prompt shows, and no spelling raises."""
    pattern = _SIGNED_NUMBER if signed else _NUMBER
    return int(move) if move is not None and pattern.fullmatch(move) else None
