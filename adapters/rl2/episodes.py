"""The episodes an RL2 env file has open, keyed by the id it writes into RL2's sample.

RL2 calls the env file per turn and never says when it drops an episode (rl-square stops at
``rollout.max_turns``, RL2 main may abandon an aborted sample), so the oldest open episodes are
closed past a bound. Every episode's env is closed when it ends or is evicted: envs can hold tool
servers and sandboxes.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from gem_adapters.rl2.api import row_label
from gem_core.errors import InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.rollout import EpisodeSession
from gem_core.rollout.options import episode_options
from gem_core.rows.label import EpisodeLabel

__all__ = ["OpenEpisode", "OpenEpisodes"]


@dataclass
class OpenEpisode:
    """One episode an RL2 env file has open: its session and the ids of a turn an abort cut short."""

    session: EpisodeSession
    pending_ids: list[int] = field(default_factory=list)
    """Ids sampled before an abort (RL2 main's partial rollout), continued by the next call."""
    pending_logps: list[float] = field(default_factory=list)
    """Log-probs of :attr:`pending_ids`."""


class OpenEpisodes:
    """Sessions started from RL2 dataset rows, at most ``max_open`` at a time (oldest closed first).

    Args:
        max_open: Most episodes open at once; starting one more closes the oldest.
        owner: The env file's class, named in option errors (``"GenerateEnv"``, ``"ResetStepEnv"``).
        **session_kwargs: :class:`~gem_core.rollout.EpisodeSession` options for every episode (``system_prompt``,
            ``max_turns``, ``max_total_tokens``).

    Raises:
        InvalidArgument: ``max_open`` is below 1, or an episode option is out of range.
    """

    def __init__(self, max_open: int, *, owner: str, **session_kwargs: Any):
        options = episode_options(None, owner, **session_kwargs)  # the env file's options, refused where it is built (``owner``)
        if max_open < 1:
            raise InvalidArgument(f"max_open_episodes must be at least 1, got {max_open}.")
        self.max_open = max_open
        self._options = options
        self._open: OrderedDict[str, OpenEpisode] = OrderedDict()
        self._ended: OrderedDict[str, None] = OrderedDict()  # the last ``max_open`` keys that ended, for "is over"

    def __len__(self) -> int:
        return len(self._open)

    def get(self, key: str | None) -> OpenEpisode | None:
        """The open episode under ``key``; None for None, an ended or evicted episode, or an unknown key."""
        return self._open.get(key) if isinstance(key, str) else None  # a list or dict there is no key (and unhashable)

    def ended(self, key: str | None) -> bool:
        """Whether ``key``'s episode ended (closed with ``ended=True``), as opposed to never opened or evicted."""
        return isinstance(key, str) and key in self._ended

    async def start(self, row: dict[str, Any], tokenizer: Tokenizer, label: EpisodeLabel | None = None) -> tuple[str, OpenEpisode, list[int]]:
        """Start the episode a dataset row names (or ``label``, a curriculum's draw): its key, the open episode and the prompt ids.

        Raises:
            LabelError: Without ``label``, the row has no GEM label or its label does not name a registered env and seed.
        """
        session = EpisodeSession.from_label(label or row_label(row), tokenizer, options=self._options)
        prompt_ids = await session.start()
        key = uuid.uuid4().hex
        self._open[key] = episode = OpenEpisode(session)
        while len(self._open) > self.max_open:
            await self.close(next(iter(self._open)))
        return key, episode, prompt_ids

    async def close(self, key: str, *, ended: bool = False) -> None:
        """Forget the episode and close its env (a no-op for an unknown key); ``ended``: it finished (done)."""
        if ended:
            self._ended[key] = None
            while len(self._ended) > self.max_open:
                self._ended.popitem(last=False)
        episode = self._open.pop(key, None)
        if episode is not None:
            await episode.session.aclose()
