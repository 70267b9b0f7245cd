"""``episodes.jsonl``: every finished episode of a ``gem eval`` run, appended and fsync'd as it finishes.

The report is rebuilt from this file at the end, so what a crash, a signal or a full disk leaves
behind is exactly the episodes that were already safe on disk. A line cut short by a crash mid-write is
skipped when the file is read back, and dropped from the file when a run resumes (``--resume``), so the
next append starts on a line of its own. Any other line that holds no record (a hand edit, a line from
another writer) is no crash's doing: a resume moves it to ``episodes.jsonl.damaged`` and says so on stderr,
and plays its episode again.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from gem_core.errors import GemError, InvalidArgument
from gem_core.eval.report import EpisodeRecord
from gem_core.transport.atomic_file import atomic_path
from gem_core.transport.folder_lock import release_folder

__all__ = ["DAMAGED_SUFFIX", "EPISODES_FILENAME", "LOCK_FILENAME", "EpisodeLog", "ReportWriteError", "read_episodes"]

EPISODES_FILENAME = "episodes.jsonl"
"""The file in an eval's output folder that holds one JSON line per finished episode (what ``--resume`` reads)."""
DAMAGED_SUFFIX = ".damaged"
"""Added to the episode log's name for the file a resume moves its unreadable lines to (``episodes.jsonl.damaged``)."""

LOCK_FILENAME = ".gem_eval.lock"
"""The file in an eval's output folder that its running run holds an exclusive lock on (and writes its pid into)."""


class ReportWriteError(GemError, OSError):
    """Writing the run's output failed (e.g. a full disk); the message says what is already on disk."""


class EpisodeLog:
    """Appends episode records to ``out_dir/episodes.jsonl``: a new file per run, or with ``resume`` the
    file of an interrupted run, cleaned of a cut-short last line and of repeated episodes (``records``
    holds what it kept). Any other line that holds no record is moved to ``episodes.jsonl.damaged``
    (appended, never lost) and named on stderr; its episode plays again.

    ``held``: the descriptor of the folder's lock (:func:`~gem_core.transport.folder_lock.lock_folder`), released
    by :meth:`close`. ``plans``: whether the run asks for an episode ``(env_id, seed, sample)``; a resumed file
    holding one it does not ask for is refused before the file is changed (it belongs to another run).

    Raises:
        InvalidArgument: if the resumed file holds an episode that ``plans`` refuses; the file is left as it was.
        ReportWriteError: if the file cannot be opened.
    """

    def __init__(self, out_dir: str | Path, *, resume: bool = False, held: int | None = None,
                 plans: Callable[[tuple[str, int, int]], bool] | None = None):
        self.path = Path(out_dir) / EPISODES_FILENAME
        self._held = held
        self.written = 0
        self.records: list[EpisodeRecord] = []
        #: Line numbers of the resumed file that held no valid record (dropped; their episodes play again).
        self.skipped_lines: list[int] = []
        #: Those of them moved to ``episodes.jsonl.damaged`` (all but a final line a kill cut short).
        self.damaged_lines: list[int] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if resume and self.path.exists():
                self.records = _unique(read_episodes(self.path, skipped=self.skipped_lines))
                unknown = next((r.key for r in self.records if plans is not None and not plans(r.key)), None)
                if unknown is not None:
                    raise InvalidArgument(f"{self.path} holds episodes this run does not ask for, e.g. (env, seed, sample) = {unknown}.")
                self.damaged_lines = self._move_aside(self.skipped_lines)
                self._rewrite(self.records)
                if self.damaged_lines:
                    shown = ", ".join(map(str, self.damaged_lines[:10])) + (", ..." if len(self.damaged_lines) > 10 else "")
                    lines = "line" if len(self.damaged_lines) == 1 else "lines"
                    print(f"gem eval: {self.path} {lines} {shown} held no episode record (only a last line cut short by a "
                          f"kill is dropped); moved to {self.path.name}{DAMAGED_SUFFIX} beside it, and their episodes play "
                          "again.", file=sys.stderr)
            self._file = open(self.path, "a" if resume else "w", encoding="utf-8")
        except OSError as exc:
            raise ReportWriteError(f"cannot open {self.path}: {exc.strerror or exc}") from exc

    def _move_aside(self, skipped: list[int]) -> list[int]:
        """Append the ``skipped`` lines to ``episodes.jsonl.damaged`` (fsync'd, before the log is rewritten without
        them), except a final line without its newline: the record a kill cut short, dropped as documented. Returns
        the numbers of the lines moved."""
        lines, ends = _line_count(self.path)
        wanted = set(skipped) - ({lines} if not ends else set())  # an unterminated last line: a kill's cut
        if not wanted:
            return []
        with open(self.path, "rb") as source, open(self.path.with_name(self.path.name + DAMAGED_SUFFIX), "ab") as aside:
            number, at_start = 0, True
            while chunk := source.readline(1024 * 1024):  # a line longer than that comes in several chunks
                if at_start:
                    number += 1
                if number in wanted:
                    aside.write(chunk)
                at_start = chunk.endswith(b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        return sorted(wanted)

    def _rewrite(self, records: list[EpisodeRecord]) -> None:
        with atomic_path(self.path) as partial:
            partial.write_text("".join(json.dumps(r.to_dict(), allow_nan=False) + "\n" for r in records), encoding="utf-8")

    def append(self, record: EpisodeRecord) -> None:
        """Write one record and force it to disk; raises :class:`ReportWriteError` on failure.

        Raises:
            InvalidArgument: if the record holds a value JSON cannot (a NaN or infinite reward, an object); nothing
                is written.
            ReportWriteError: if the record cannot be written (a full disk, a removed folder).
        """
        try:
            line = json.dumps(record.to_dict(), allow_nan=False) + "\n"
        except (ValueError, TypeError) as exc:  # caught before the write: the file stays a list of whole records
            raise InvalidArgument(
                f"cannot write the episode ({record.env_id}, seed {record.seed}, sample {record.sample}) to {self.path}: "
                f"{exc} (rewards {record.rewards!r:.200}); an episode's values must be JSON numbers and texts"
            ) from None
        try:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise ReportWriteError(
                f"cannot write to {self.path} ({exc.strerror or exc}); the {self.written} episodes finished "
                f"before are in that file"
            ) from exc
        self.written += 1

    def close(self) -> None:
        """Close the file and give up the folder; what was written is already on disk (each record is fsync'd)."""
        try:
            self._file.close()
        except OSError:  # the data that could be written was fsync'd already
            pass
        held, self._held = self._held, None
        release_folder(self.path.parent, LOCK_FILENAME, held)


def _line_count(path: Path) -> tuple[int, bool]:
    """How many lines ``path`` holds (as :func:`read_episodes` numbers them), and whether it ends with a newline."""
    count, last = 0, b"\n"
    with open(path, "rb") as source:
        while block := source.read(1024 * 1024):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n"), last == b"\n"


def _unique(records: list[EpisodeRecord]) -> list[EpisodeRecord]:
    """The first record of each episode (a hand-merged log may repeat one)."""
    kept: dict[tuple[str, int, int], EpisodeRecord] = {}
    for record in records:
        kept.setdefault(record.key, record)
    return list(kept.values())


#: The longest line read back (bytes): one episode's transcript is kilobytes to a few megabytes; a longer
#: line is skipped unparsed (its episode counts as not played, so a resume plays it again).
MAX_LINE_BYTES = 64 * 1024 * 1024


def read_episodes(path: str | Path, *, skipped: list[int] | None = None) -> list[EpisodeRecord]:
    """The records in an ``episodes.jsonl``. A line that is not a valid record (a final line cut short by
    a crash, a hand edit, a line longer than :data:`MAX_LINE_BYTES`) is left out; its line number is
    added to ``skipped`` when given."""
    records = []
    with open(path, "rb") as lines:
        number, too_long = 0, False
        while True:
            line = lines.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if too_long:  # the rest of a line already skipped
                too_long = not line.endswith(b"\n")
                continue
            number += 1
            if len(line) > MAX_LINE_BYTES:
                too_long = not line.endswith(b"\n")
                _note(skipped, number)
                continue
            if not line.strip():
                continue
            try:
                records.append(EpisodeRecord.from_dict(json.loads(line)))
            except (ValueError, TypeError, RecursionError):
                _note(skipped, number)
    return records


def _note(skipped: list[int] | None, number: int) -> None:
    if skipped is not None:
        skipped.append(number)
