"""How deep JSON text nests, found without parsing it.

Python's ``json`` recurses once per array or object level, so a kilobyte of brackets exhausts the
interpreter's stack. Text from a model or a server (a tool call, a judge's verdict) is checked here first,
and refused as malformed when it nests too deep.
"""

from __future__ import annotations

import re

__all__ = ["nests_deeper_than"]

_JSON_STRUCTURE = re.compile(r'[\[\]{}"\\]')


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests arrays and objects more than ``limit`` deep (brackets inside strings do
    not count), found in one pass over its structural characters, without recursion."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string, escaped_until = 0, False, -1
    for found in _JSON_STRUCTURE.finditer(text):
        position, char = found.start(), found.group()
        if position < escaped_until:
            continue  # the character a backslash escapes
        if in_string:
            if char == "\\":
                escaped_until = position + 2
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth = max(depth - 1, 0)
    return False
