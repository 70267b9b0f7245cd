"""``episodes.jsonl``: every finished episode of a ``gem eval`` run, appended and fsync'd as it finishes.

The report is rebuilt from this file at the end, so what a crash, a signal or a full disk leaves
behind is exactly the episodes that were already safe on disk. A line cut short by a crash mid-write is
skipped when the file is read back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gem_core.eval.report import EpisodeRecord

__all__ = ["EPISODES_FILENAME", "EpisodeLog", "ReportWriteError", "read_episodes"]

EPISODES_FILENAME = "episodes.jsonl"


class ReportWriteError(OSError):
    """Writing the run's output failed (e.g. a full disk); the message says what is already on disk."""


class EpisodeLog:
    """Appends episode records to ``out_dir/episodes.jsonl`` (a new file per run)."""

    def __init__(self, out_dir: str | Path):
        self.path = Path(out_dir) / EPISODES_FILENAME
        self.written = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w", encoding="utf-8")
        except OSError as exc:
            raise ReportWriteError(f"cannot create {self.path}: {exc.strerror or exc}") from exc

    def append(self, record: EpisodeRecord) -> None:
        """Write one record and force it to disk; raises :class:`ReportWriteError` on failure."""
        try:
            self._file.write(json.dumps(record.to_dict(), allow_nan=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise ReportWriteError(
                f"cannot write to {self.path} ({exc.strerror or exc}); the {self.written} episodes finished "
                f"before are in that file"
            ) from exc
        self.written += 1

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:  # the data that could be written was fsync'd already
            pass


def read_episodes(path: str | Path) -> list[EpisodeRecord]:
    """The records in an ``episodes.jsonl`` (a final line cut short by a crash is left out)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(EpisodeRecord.from_dict(json.loads(line)))
        except (ValueError, TypeError):
            continue
    return records
