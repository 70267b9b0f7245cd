"""Re-grade a ``gem eval`` run from its stored transcripts: ``gem eval --rescore DIR``.

A grader fix changes rewards, not what the model said. Each episode's transcript holds the model's
actions, and the same seed gives the same episode, so stepping those actions through the current env
(:func:`gem_core.rollout.replay.replay_actions`, the engine of ``gem replay``) re-scores the run
without calling the model. The transcript is kept as the model saw it; rewards, success, format errors
and the end of the episode are the current env's. Failed episodes (a backend error) are kept as they
were: they have no verdict to re-check.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gem_core import placement
from gem_core.env import episode_success
from gem_core.errors import InvalidArgument
from gem_core.eval.episode_log import EPISODES_FILENAME, read_episodes
from gem_core.eval.report import REPORT_FILENAME, EpisodeRecord, EvalReport, fail_non_finite, step_error
from gem_core.eval.resume import RUN_FILENAME, read_run_header
from gem_core.rollout.replay import StoredEpisode, replay_actions

__all__ = ["load_run", "rescore_report", "rescore_record", "run_episodes_to_replay"]


def load_run(path: str | Path) -> EvalReport:
    """The report of a run: a ``report.json`` file, or a run folder (its ``run.json`` and
    ``episodes.jsonl`` when present, which hold every finished episode even after a SIGKILL; else its
    ``report.json``).

    Raises:
        InvalidArgument: if ``path`` holds no gem eval run.
    """
    path = Path(path)
    if path.is_dir() and (path / RUN_FILENAME).is_file() and (path / EPISODES_FILENAME).is_file():
        header = read_run_header(path)
        episodes: dict[str, list[EpisodeRecord]] = {env_id: [] for env_id in header.env_ids}
        for record in read_episodes(path / EPISODES_FILENAME):
            episodes.setdefault(record.env_id, []).append(record)
        for records in episodes.values():
            records.sort(key=lambda r: (r.seed, r.sample))
        report = EvalReport(header.model, header.backend, header.config, header.env_ids, episodes,
                            started_at=header.started_at, resumed_at=header.resumed_at)
        planned = len(header.env_ids) * header.config.get("episodes", 0) * report.samples
        report.interrupted = report.episodes_finished < planned
        return report
    if path.is_dir() and not (path / REPORT_FILENAME).is_file():
        raise InvalidArgument(f"{path} holds no gem eval run (no {REPORT_FILENAME}, nor {RUN_FILENAME} with {EPISODES_FILENAME}).")
    return EvalReport.load(path)


def run_episodes_to_replay(path: str | Path, *, left_out: list[str] | None = None) -> Iterator[StoredEpisode]:
    """The episodes of a ``gem eval`` run as ``gem replay`` steps them: a run folder, its ``episodes.jsonl`` or
    a ``report.json``. Each episode's actions are its transcript's assistant turns, and the run's
    ``--max-turns`` (from ``run.json`` or the report) is its env kwarg, as the run built its envs.

    A failed episode (a backend error, a judge with no verdict) has no score to re-check and is left out,
    as ``gem eval --rescore`` leaves it; so is a line that holds no episode (a line a crash cut short). Each
    one left out is described in ``left_out`` when given.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if path.is_dir() or path.name == REPORT_FILENAME or (folder / RUN_FILENAME).is_file():
        report = load_run(path if path.is_dir() or path.name == REPORT_FILENAME else folder)
        max_turns = report.config.get("max_turns")
        records = [record for env_id in report.env_ids for record in report.episodes.get(env_id, [])]
    else:  # an episodes.jsonl on its own: the envs' registered turn limits
        skipped: list[int] = []
        records, max_turns = read_episodes(path, skipped=skipped), None
        if left_out is not None:
            left_out.extend(f"line {number}: not an episode record" for number in skipped)
    for record in records:
        if record.failed:
            if left_out is not None:
                left_out.append(f"{record.env_id} seed {record.seed} sample {record.sample}: failed ({record.error})")
            continue
        actions = [m["content"] for m in record.transcript if m.get("role") == "assistant"]
        yield StoredEpisode(record.env_id, record.seed, actions, list(record.rewards),
                            {} if max_turns is None else {"max_turns": max_turns}, record.terminated)


def rescore_record(record: EpisodeRecord, env: Any) -> tuple[EpisodeRecord, list[dict[str, Any]]]:
    """``record`` re-graded by ``env`` (reset with its seed, stepped with its transcript's actions), and
    the turns whose reward or end changed (``{"turn", "stored_reward", "replayed_reward", "note"}``).

    ``env`` must be built as the run built it: ``make_env(env_id, max_turns=<the run's --max-turns>)``, which
    replaces the registered turn limit (a limit wrapped around the registered one would still end the game at the
    registered one). A reward that is not finite fails the episode as in a live run
    (:func:`~gem_core.eval.report.fail_non_finite`); a changed turn then shows it as a text (``"nan"``), since JSON
    holds no such number."""
    if record.failed:
        return record, []
    actions = [m["content"] for m in record.transcript if m.get("role") == "assistant"]
    replay = replay_actions(env, record.seed, actions, record.rewards)
    rescored = dataclasses.replace(
        record,
        rewards=replay.rewards,
        terminated=replay.terminated,
        truncated=replay.truncated,
        format_errors=sum(bool(info.get("format_error")) for info in replay.infos),
        success=episode_success(replay.infos, sum(replay.rewards), replay.terminated),
        error=step_error(replay.infos),  # a judge that gave no verdict now: failed, as in a live run
    )
    fail_non_finite(rescored)
    changes = [
        {"turn": c.turn, "stored_reward": _json_number(c.stored_reward), "replayed_reward": _json_number(c.replayed_reward),
         "note": c.note}
        for c in replay.changes
    ]
    return rescored, changes


def _json_number(value: Any) -> Any:
    """``value``, or its text when JSON cannot hold it (NaN, inf)."""
    return value if not isinstance(value, float) or math.isfinite(value) else repr(value)


def rescore_report(
    report: EvalReport, *, source: str | Path | None = None, env_overrides: Callable[[str], dict[str, Any]] | None = None
) -> EvalReport:
    """A copy of ``report`` re-graded by the current envs; ``rescore`` in it lists every changed episode.
    ``env_overrides`` (``env_id -> make() overrides``) is :func:`~gem_core.eval.runner.evaluate_async`'s: a
    judged env is re-graded by the judge the caller gives, since a run's files never name one."""
    max_turns = report.config.get("max_turns")
    envs: dict[str, Any] = {}
    changed: list[dict[str, Any]] = []
    episodes: dict[str, list[EpisodeRecord]] = {}
    try:
        for env_id in report.env_ids:
            episodes[env_id] = []
            for record in report.episodes.get(env_id, []):
                if not record.failed and env_id not in envs:  # as the run built it: the one turn limit
                    overrides = env_overrides(env_id) if env_overrides is not None else {}
                    limit = {} if max_turns is None else {"max_turns": max_turns}  # None: the registered limit
                    envs[env_id] = placement.make_env(env_id, **limit, **overrides)
                rescored, turns = rescore_record(record, envs.get(env_id))
                episodes[env_id].append(rescored)
                if turns or rescored.success != record.success or rescored.terminated != record.terminated:
                    changed.append({
                        "env_id": env_id,
                        "seed": record.seed,
                        "sample": record.sample,
                        "return": [record.episode_return, rescored.episode_return],
                        "success": [record.success, rescored.success],
                        "turns": turns,
                    })
    finally:
        for env in envs.values():
            env.close()
    return dataclasses.replace(
        report,
        episodes=episodes,
        rescore={
            "from": str(source) if source is not None else None,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "episodes_rescored": sum(not r.failed for records in episodes.values() for r in records),
            "changed": changed,
        },
    )
