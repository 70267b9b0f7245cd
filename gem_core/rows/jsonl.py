"""Dataset rows as JSON lines, the file format OpenRLHF and RL2 read their prompts from."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_jsonl"]


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write ``rows`` as JSON lines (the format OpenRLHF and RL2 read); returns how many.

    Every row is serialized before the file is opened, so a row that is not JSON leaves no half-written file.
    """
    lines = [json.dumps(row) + "\n" for row in rows]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(lines), encoding="utf-8")
    return len(lines)
