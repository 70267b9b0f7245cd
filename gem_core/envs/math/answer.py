"""Find the final answer in a model's response, in time linear in its length.

The dataset-backed tasks (math, QA, ReasoningGym) ask for the final answer in ``\\boxed{...}``. Math
answers nest braces (``\\boxed{\\frac{1}{2}}``), so the box is matched by counting braces, not by a
regex; the last complete box wins, so a model may think aloud (and quote the format) first.

A model's output is untrusted: both extractors make one left-to-right pass (``"\\boxed{" * 10000``
once took 68 s with a rescan per opener), and an answer longer than :data:`MAX_ANSWER_CHARS` is not
an answer, so no grader downstream is handed megabytes to parse.
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["extract_boxed", "extract_tagged", "extract_final_answer", "BOXED_HINT", "MAX_ANSWER_CHARS"]

BOXED_HINT = "Put your final answer inside \\boxed{}, for example \\boxed{42}."
r"""The instruction math envs append to ask for the final answer in ``\boxed{}``."""

MAX_ANSWER_CHARS = 20_000
"""Longest final answer (in characters) the extractors return; a longer box or tag counts as no answer.
Real answers (an expression, a list, a short program for ReasoningGym's Brainf*ck tasks) are far shorter.
"""

# One token stream: a box opener (ending in its "{"), or a run of plain braces. Written to start with a
# character class, which lets the regex engine skip ahead to the next candidate (4x faster on prose).
_BRACE_TOKENS = re.compile(r"[\\{}](?:(?<=\\)(?:boxed|fbox)\s*\{|(?<=\{)\{*|(?<=\})\}*)")
_OPEN_TAG = re.compile(r"<answer>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</answer>", re.IGNORECASE)


def _last_box_span(text: str) -> tuple[int, int] | None:
    """``(start, end)`` of the content of the complete box whose opener comes last, in one pass.

    Brace depth is counted, runs of braces at once; each open box remembers the depth its ``{`` made,
    and closes at the ``}`` that brings the depth below it. A ``}`` at depth 0 closes nothing.
    """
    depth = 0
    boxes: list[tuple[int, int]] = []  # (depth inside the box, content start) of open boxes
    best: tuple[int, int] | None = None
    for match in _BRACE_TOKENS.finditer(text):
        token = match.group()
        if token[0] == "{":
            depth += len(token)
        elif token[0] == "}":
            closed_to = max(depth - len(token), 0)
            while boxes and boxes[-1][0] > closed_to:
                box_depth, start = boxes.pop()
                end = match.start() + (depth - box_depth)  # the "}" that took depth from box_depth down
                if best is None or start > best[0]:
                    best = (start, end)
            depth = closed_to
        else:
            depth += 1
            boxes.append((depth, match.end()))
    return best


def extract_boxed(text: str) -> str | None:
    """The content of the last complete ``\\boxed{...}`` (or ``\\fbox{...}``), stripped; ``None`` if none.

    An unclosed box (``\\boxed{1/2``) is not an answer, nor is one over :data:`MAX_ANSWER_CHARS`.
    """
    span = _last_box_span(text)
    if span is None or span[1] - span[0] > MAX_ANSWER_CHARS:
        return None
    return text[span[0] : span[1]].strip()


def _last_tag_span(text: str) -> tuple[int, int] | None:
    closing = deque(_CLOSE_TAG.finditer(text), maxlen=1)  # the last match, without a list of all
    if not closing:
        return None
    end = closing[0].start()
    opening = deque(_OPEN_TAG.finditer(text, 0, end), maxlen=1)
    return (opening[0].end(), end) if opening else None


def extract_tagged(text: str) -> str | None:
    """The content of the last ``<answer>...</answer>``, stripped; ``None`` if none (or too long).

    The last closing tag and the nearest opening tag before it: ``<answer>a<answer>b</answer>`` gives ``b``.
    """
    span = _last_tag_span(text)
    if span is None or span[1] - span[0] > MAX_ANSWER_CHARS:
        return None
    return text[span[0] : span[1]].strip()


def extract_final_answer(text: str) -> str | None:
    """The last ``\\boxed{}`` or ``<answer></answer>``, whichever ends later in ``text``.

    Tags are accepted for answers that contain unbalanced braces (code, Brainf*ck programs).
    """
    box, tag = _last_box_span(text), _last_tag_span(text)
    if box is not None and tag is not None:
        if tag[1] > box[1]:
            return extract_tagged(text)
        return extract_boxed(text)
    return extract_boxed(text) if box is not None else (extract_tagged(text) if tag is not None else None)
