"""Dataset rows as JSON lines, the file format OpenRLHF and RL2 read their prompts from."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.transport.atomic_file import atomic_path

__all__ = ["write_jsonl"]


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write ``rows`` as JSON lines (the format OpenRLHF and RL2 read); returns how many.

    The file appears whole or not at all (:func:`~gem_core.transport.atomic_file.atomic_path`): a row that is
    not JSON, a full disk or a signal leaves the previous file, if any, and no half-written one.

    Raises:
        InvalidArgument: a row is not JSON (an object json cannot write, or NaN or Infinity, which Python's json
            would write as bare words that Arrow and ``datasets`` refuse); the message names the row.
        OSError: the file cannot be written (the previous one is kept).
    """
    lines = []
    for number, row in enumerate(rows, start=1):
        try:
            lines.append(json.dumps(row, allow_nan=False) + "\n")
        except (TypeError, ValueError) as error:
            raise InvalidArgument(f"row {number} of {path} is not JSON ({error}); its labels, kwargs and info must be JSON values.") from None
    with atomic_path(path) as partial:
        partial.write_text("".join(lines), encoding="utf-8")
    return len(lines)
