"""A live progress bar for an evaluation: episodes done, success rate so far, failures."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from gem_core.eval.report import EpisodeRecord

__all__ = ["EvalProgress"]


class EvalProgress:
    """One tqdm bar over all episodes of all envs; the postfix shows the live success rate per env.

    Args:
        total: episodes in the whole run.
        enabled: False shows no bar (counts are still kept).
        description: the bar's label.
        done: episodes finished before (a resumed run), counted from the start.
    """

    def __init__(
        self, total: int, *, enabled: bool = True, description: str = "gem eval", done: Iterable[EpisodeRecord] = ()
    ):
        """``done``: episodes finished before (a resumed run), counted from the start."""
        from tqdm.auto import tqdm  # here, not at import: every `gem` command builds eval's parser (the eval extra has tqdm)

        self._bar = tqdm(total=total, desc=description, unit="ep", disable=not enabled, file=sys.stderr, dynamic_ncols=True)
        self._successes: dict[str, int] = {}
        self._completed: dict[str, int] = {}
        self._failed = 0
        for record in done:
            self.update(record)

    def update(self, record: EpisodeRecord) -> None:
        """Count one finished episode and refresh the per-env success rates on the bar."""
        if record.failed:
            self._failed += 1
        else:
            self._completed[record.env_id] = self._completed.get(record.env_id, 0) + 1
            self._successes[record.env_id] = self._successes.get(record.env_id, 0) + int(record.success)
        postfix = {env_id: f"{self._successes[env_id] / n:.0%}" for env_id, n in self._completed.items()}
        if self._failed:
            postfix["failed"] = str(self._failed)
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        """Close the progress bar."""
        self._bar.close()
