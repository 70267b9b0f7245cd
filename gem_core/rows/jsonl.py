"""Dataset rows as JSON lines, the file format OpenRLHF and RL2 read their prompts from."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gem_core.transport.atomic_file import atomic_path

__all__ = ["write_jsonl"]


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write ``rows`` as JSON lines (the format OpenRLHF and RL2 read); returns how many.

    The file appears whole or not at all (:func:`~gem_core.transport.atomic_file.atomic_path`): a row that is
    not JSON, a full disk or a signal leaves the previous file, if any, and no half-written one.
    """
    lines = [json.dumps(row) + "\n" for row in rows]
    with atomic_path(path) as partial:
        partial.write_text("".join(lines), encoding="utf-8")
    return len(lines)
