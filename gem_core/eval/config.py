"""What ``gem eval`` evaluates and how: :class:`EvalConfig`, read by the runner and by both episode
backends (its own module, so the backends need not import the runner that imports them)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.eval.bounds import check_settings

__all__ = ["EvalConfig", "existing_run"]


@dataclass
class EvalConfig:
    """What to evaluate and how. Every field has a default but ``env_ids``.

    Raises:
        InvalidArgument: if a setting is out of bounds, ``out_dir`` is ``""``, or ``resume`` is set without
            ``out_dir`` or with ``overwrite``.
        InvalidArgumentType: if ``env_ids`` is not a list of ids (str), ``out_dir`` not a path, or a switch not a bool.
    """

    env_ids: list[str] = field(default_factory=list, metadata={"help": "Env ids to evaluate, e.g. game:Wordle-v0."})
    episodes: int = field(default=10, metadata={"help": "Episodes (seeds) per env."})
    seed: int = field(default=0, metadata={"help": "Episode i of every env uses seed `seed + i`."})
    samples: int = field(default=1, metadata={"help": "Episodes per seed; the report gives pass@k and mean@k over them."})
    concurrency: int = field(default=8, metadata={"help": "Episodes played at once (across all envs)."})
    max_turns: int | None = field(default=None, metadata={"help": "Turns per episode, replacing the env's registered limit as make(id, max_turns=) does (None: the registered limit)."})
    max_new_tokens: int = field(default=256, metadata={"help": "Tokens the model may generate per turn."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling threshold."})
    top_k: int = field(default=0, metadata={"help": "Top-k sampling (0: off)."})
    system_prompt: str | None = field(default=None, metadata={"help": "System message placed before the first observation."})
    out_dir: str | None = field(default=None, metadata={"help": "Where report.json and the plots go (None: nothing is written; '' is refused, '.' is the current folder)."})
    plots: bool = field(default=True, metadata={"help": "Write PNG plots next to the report."})
    progress: bool = field(default=True, metadata={"help": "Show a live progress bar on stderr."})
    resume: bool = field(default=False, metadata={"help": "Continue the interrupted run in out_dir: play only its missing episodes."})
    overwrite: bool = field(default=False, metadata={"help": "Replace the run already in out_dir (without it, an out_dir holding one is refused)."})

    def __post_init__(self) -> None:
        if isinstance(self.env_ids, str):
            self.env_ids = [self.env_ids]
        elif not isinstance(self.env_ids, Iterable):
            raise InvalidArgumentType(f"env_ids: {self.env_ids!r:.60} is not a list of env ids; give e.g. env_ids=['game:Wordle-v0'].")
        else:  # items checked before dict.fromkeys below hashes them
            self.env_ids = list(self.env_ids)
            for index, env_id in enumerate(self.env_ids):
                if not isinstance(env_id, str):
                    raise InvalidArgumentType(f"env_ids[{index}]: {env_id!r:.60} is not an env id; give each id as a str, "
                                              "e.g. env_ids=['game:Wordle-v0'].")
        if isinstance(self.out_dir, os.PathLike):
            self.out_dir = os.fspath(self.out_dir)
        if self.out_dir is not None and not isinstance(self.out_dir, str):
            raise InvalidArgumentType(f"out_dir: {self.out_dir!r:.60} is not a folder path; give a str or a pathlib.Path "
                                      "(the folder is created), or None to write nothing.")
        if self.out_dir == "":  # Path("") is the current folder: a run would be spread among whatever is there
            raise InvalidArgument("out_dir: '' is no folder; give the path of a folder for the run's files (it is "
                                  "created; '.' if you mean the current one), or None to write nothing.")
        for name in ("plots", "progress", "resume", "overwrite"):  # a truthy 'no' would turn the switch on
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgumentType(f"{name}: {getattr(self, name)!r:.60} is not True or False.")
        self.env_ids = list(dict.fromkeys(self.env_ids))  # a repeated id would be evaluated once
        # The bounds first: they name a setting of the wrong type ("episodes: '3' is not a whole number.")
        # where a comparison would raise a bare TypeError.
        check_settings(self.run_settings(), where="", env_count=len(self.env_ids))
        if self.resume and self.out_dir is None:
            raise InvalidArgument("resume=True needs out_dir: the folder of the run to continue.")
        if self.resume and self.overwrite:
            raise InvalidArgument("resume=True continues the run in out_dir and overwrite=True replaces it; give one of them.")

    def check_out_dir(self) -> None:
        """Raise ValueError when ``out_dir`` already holds a run that this one would replace unasked
        (neither ``resume`` nor ``overwrite``): a new run rewrites run.json, episodes.jsonl and report.json.

        Raises:
            InvalidArgument: if ``out_dir`` holds a run and neither ``resume`` nor ``overwrite`` is set.
        """
        if self.out_dir is None or self.resume or self.overwrite:
            return
        existing = existing_run(self.out_dir)
        if existing:
            raise InvalidArgument(f"out_dir {self.out_dir} already holds a run ({existing}); continue it with resume=True, "
                             "replace it with overwrite=True, or choose another out_dir.")

    @property
    def planned_episodes(self) -> int:
        """Episodes the run asks for: every env, seed and sample."""
        return len(self.env_ids) * self.episodes * self.samples

    def planned(self) -> Iterator[tuple[str, int, int]]:
        """``(env_id, seed, sample)`` of each planned episode, in order, one at a time (a long run never
        holds the whole plan in memory)."""
        for env_id in self.env_ids:
            for i in range(self.episodes):
                for sample in range(self.samples):
                    yield env_id, self.seed + i, sample

    def plans(self, key: tuple[str, int, int]) -> bool:
        """Whether ``key`` is one of :meth:`planned`'s episodes."""
        env_id, seed, sample = key
        return env_id in self.env_ids and 0 <= seed - self.seed < self.episodes and 0 <= sample < self.samples

    def run_settings(self) -> dict[str, Any]:
        """The fields that shape the episodes (what a report needs to be reproduced)."""
        skip = {"env_ids", "out_dir", "plots", "progress", "resume", "overwrite"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


def existing_run(out_dir: str | Path) -> str | None:
    """What of an earlier run ``out_dir`` holds (None when nothing): a new run there would replace it.
    ``gem eval --out`` (without ``--overwrite``) and :meth:`EvalConfig.check_out_dir` refuse on it."""
    from gem_core.eval.episode_log import EPISODES_FILENAME
    from gem_core.eval.report import REPORT_FILENAME

    out = Path(out_dir)
    episodes = out / EPISODES_FILENAME
    if episodes.is_file() and episodes.stat().st_size > 0:
        return f"its {EPISODES_FILENAME}"
    if (out / REPORT_FILENAME).is_file():
        return f"its {REPORT_FILENAME}"
    return None
