"""GEM training datasets: which episode a dataset row stands for, and the rows themselves.

A training dataset sits outside the episode engine: it names episodes (env id, seed, env kwargs) that
the engine (:mod:`gem_core.rollout`) later plays. Every adapter's ``make_dataset`` builds its rows here
and only lays them out in its framework's columns; every adapter's hook reads a row's label back here.

- :mod:`~gem_core.rows.label`: :class:`EpisodeLabel`, :func:`parse_label`, :class:`LabelError`.
- :mod:`~gem_core.rows.rows`: :class:`EpisodeRow`, :func:`episode_rows`, :class:`EnvKwargsError`, :func:`refuse_system_prompt`.
- :mod:`~gem_core.rows.mixture`: weighted mixtures ``{env_id: weight}`` (:func:`env_weights`), the
  ``--env ID:WEIGHT`` option (:func:`parse_env_options`), :class:`MixtureError`.
- :mod:`~gem_core.rows.jsonl`: :func:`write_jsonl` (OpenRLHF's and RL2's file format).

The shared ``make_dataset`` command line is part of the CLI (:mod:`gem_core.cli.dataset`), so nothing
here imports ``argparse``.
"""

from gem_core.rows.jsonl import write_jsonl
from gem_core.rows.label import EnvKwargsError, EpisodeLabel, LabelError, make_label_env, parse_label
from gem_core.rows.mixture import EnvIds, MixtureError, env_weights, parse_env_options
from gem_core.rows.rows import EpisodeRow, episode_rows, refuse_system_prompt

__all__ = [
    "EnvIds", "EnvKwargsError", "EpisodeLabel", "EpisodeRow", "LabelError", "MixtureError", "env_weights", "episode_rows", "make_label_env",
    "parse_env_options", "parse_label", "refuse_system_prompt", "write_jsonl",
]
