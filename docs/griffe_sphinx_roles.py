"""A griffe extension for the API reference: Sphinx roles in docstrings read as code.

The docstrings name other objects the way ``help()`` readers and Sphinx know (``:class:`~gem_core.Env```,
``:func:`make```); mkdocstrings renders Markdown, where the role would show as literal ``:class:`` text. Each
role becomes inline code of the name it shows (the last part with ``~``, as Sphinx shows it). Not links:
a short name (``:meth:`reset```) has no page of its own to point to, and an unresolved cross-reference fails
the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: ``:class:`name```, ``:py:meth:`~a.b.c```, ``:func:`title <target>```.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|type):`([^`]+)`")


def shown_name(target: str) -> str:
    """What Sphinx shows for a role's target: ``title`` of ``title <target>``, the last part of ``~a.b.c``."""
    titled = re.fullmatch(r"(.+?)\s*<[^>]+>", target)
    if titled:
        return titled.group(1)
    return target[1:].rsplit(".", 1)[-1] if target.startswith("~") else target


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring's Sphinx roles as inline code once the object tree is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Replace the roles in ``obj``'s docstring (objects without one are left alone)."""
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(lambda found: f"`{shown_name(found.group(1))}`", obj.docstring.value)
