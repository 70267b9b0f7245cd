"""Finding ``<tag>...</tag>`` spans in an action in one pass.

``re.finditer(r"<tag>(.*?)</tag>", re.DOTALL)`` rescans the rest of the text from every opening tag
that has no closing tag after it, so an action of openers alone costs quadratic time: 160 KB of
``<python>`` took 20 s, ``<tool_call>{`` 60 s, and a 1 MB action would take many minutes (issue 14,
bounded work on every path). Once one opener has no closer after it, no later opener has one either,
so a scan that stops there finds the same spans in linear time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from gem_core.errors import InvalidArgument

__all__ = ["TagSpan", "tag_spans"]


class TagSpan(NamedTuple):
    """One ``open ... close`` pair: ``text[start:end]`` is the whole of it, ``text[body_start:body_end]``
    what lies between the tags."""

    start: int
    body_start: int
    body_end: int
    end: int

    def body(self, text: str) -> str:
        """The text between the tags, cut from ``text`` (the string the span was found in)."""
        return text[self.body_start : self.body_end]


def tag_spans(text: object, open_tag: str, close_tag: str) -> Iterator[TagSpan]:
    """Each ``open_tag ... close_tag`` in ``text``, left to right, non-overlapping, each body ending at
    the first ``close_tag`` after its opener: the matches of ``open(.*?)close`` with ``re.DOTALL``.
    An action that is not a str holds no tags: the env behind the tool answers it as malformed.

    Raises:
        InvalidArgument: if a tag is empty.
    """
    if not open_tag or not close_tag:
        raise InvalidArgument("tag_spans needs non-empty opening and closing tags")
    if not isinstance(text, str):
        return
    position = 0
    while True:
        start = text.find(open_tag, position)
        if start < 0:
            return
        body_start = start + len(open_tag)
        body_end = text.find(close_tag, body_start)
        if body_end < 0:
            return  # no closer after this opener, hence none after a later one
        end = body_end + len(close_tag)
        yield TagSpan(start, body_start, body_end, end)
        position = end
