"""Continue an interrupted ``gem eval`` run from what it left on disk.

A run writes ``run.json`` (model, backend, env ids, settings) before its first episode and appends each
finished episode to ``episodes.jsonl`` (:mod:`gem_core.eval.episode_log`). Neither needs the process
to end cleanly, so even after a SIGKILL or a power cut the folder says what was asked for and what is
done. Resuming plays exactly the episodes that are missing; a resumed run that asks for other episodes
(another env, seed, episode count, model or sampling setting) is refused, since its report would mix
two experiments.

A run folder is data someone may have edited: :func:`read_run_header` types and bounds every field
(:mod:`gem_core.eval.bounds`) before the run uses it, and the CLI never takes from it the settings that
send traffic somewhere or load code (``--base-url``, an in-process ``--model``, ``remote:`` env ids).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.errors import GemError, MalformedFile
from gem_core.eval.bounds import BACKEND_BOUNDS, check_settings, setting_problem
from gem_core.eval.report import REPORT_FILENAME, EvalReport
from gem_core.transport.atomic_file import atomic_path

__all__ = ["RUN_FILENAME", "EPISODE_SETTINGS", "JUDGE_SETTINGS", "RunHeader", "ResumeMismatch", "read_run_header", "write_run_header", "check_header", "check_resume", "check_resumed_episodes"]

RUN_FILENAME = "run.json"
"""The file in an eval's output folder that records the run's settings, so ``--resume`` can refuse a changed run."""
RUN_FORMAT = "gem.eval_run/1"
#: A run file holds settings, not episodes: anything larger is not one.
MAX_RUN_FILE_BYTES = 4 * 1024 * 1024

EPISODE_SETTINGS = ("episodes", "seed", "samples", "max_turns", "max_new_tokens", "temperature", "top_p", "top_k", "system_prompt")
"""The settings that decide which episodes are played and how; a resumed run must ask for the same.
(``concurrency`` and the backend's transport settings may change: they do not change an episode.)
"""
#: Defaults of settings that older runs did not record.
_SETTING_DEFAULTS = {"samples": 1}
JUDGE_SETTINGS = ("model", "rubric")
"""What ``config.judges`` records of each judged env's judge (:func:`~gem_core.eval.runner.judges_of`); a resume must
give the same, as ``judge_model`` and ``judge_rubric`` (``--judge-model``, ``--judge-rubric``)."""


class ResumeMismatch(GemError, ValueError):
    """A resumed run asks for other episodes than the run it continues; ``setting`` names what differs.

    Args:
        setting: the name of the setting that differs.
        stored: its value in the interrupted run.
        requested: its value now.
        path: the run file that holds the stored value.
    """

    def __init__(self, setting: str, stored: Any, requested: Any, path: Path):
        super().__init__(
            f"{setting}={requested!r} differs from the interrupted run's {stored!r} ({path}); resume with the "
            f"same {setting}, or start a new run in another folder."
        )
        self.setting, self.stored, self.requested = setting, stored, requested


@dataclass
class RunHeader:
    """What a run folder says was asked for."""

    model: str
    backend: str
    env_ids: list[str]
    config: dict[str, Any]
    started_at: str | None = None
    resumed_at: list[str] = field(default_factory=list)
    path: Path = Path(RUN_FILENAME)

    @classmethod
    def of_report(cls, report: EvalReport, path: Path) -> RunHeader:
        """The header of ``report`` (model, backend, envs, settings, start times), as found at ``path``."""
        return cls(report.model, report.backend, list(report.env_ids), dict(report.config), report.started_at, list(report.resumed_at), path)


def write_run_header(out_dir: str | Path, report: EvalReport) -> Path:
    """Write ``out_dir/run.json`` from ``report``'s header, atomically and fsync'd (before any episode runs)."""
    path = Path(out_dir) / RUN_FILENAME
    data = {
        "format": RUN_FORMAT,
        "model": report.model,
        "backend": report.backend,
        "env_ids": list(report.env_ids),
        "config": report.config,
        "started_at": report.started_at,
        "resumed_at": list(report.resumed_at),
    }
    text = json.dumps(data, indent=2, allow_nan=False)
    with atomic_path(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return path


def read_run_header(out_dir: str | Path) -> RunHeader:
    """The header of the run in ``out_dir``: its ``run.json``, or the ``report.json`` of a run made before
    ``run.json`` existed.

    Raises:
        ValueError: the folder holds no ``gem eval`` run.
    """
    out_dir = Path(out_dir)
    path = out_dir / RUN_FILENAME
    if path.is_file():
        if path.stat().st_size > MAX_RUN_FILE_BYTES:
            raise MalformedFile(f"{path} is larger than {MAX_RUN_FILE_BYTES} bytes; not a gem eval run file.")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedFile(f"{path} is not valid JSON ({exc}).") from None
        except RecursionError:
            raise MalformedFile(f"{path} is nested too deeply to be a gem eval run file.") from None
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        if found != RUN_FORMAT:
            raise MalformedFile(f"{path} is not a gem eval run file (format={found!r}, expected {RUN_FORMAT!r}).")
        try:
            header = RunHeader(
                model=data["model"],
                backend=data["backend"],
                env_ids=list(data["env_ids"]),
                config=dict(data["config"]),
                started_at=data.get("started_at"),
                resumed_at=list(data.get("resumed_at", [])),
                path=path,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedFile(f"{path} is damaged: {type(exc).__name__}: {exc}.") from None
        check_header(header)
        return header
    if (out_dir / REPORT_FILENAME).is_file():
        try:
            header = RunHeader.of_report(EvalReport.load(out_dir / REPORT_FILENAME), out_dir / REPORT_FILENAME)
        except (KeyError, TypeError, AttributeError) as exc:
            raise MalformedFile(f"{out_dir / REPORT_FILENAME} is damaged: {type(exc).__name__}: {exc}.") from None
        check_header(header)
        return header
    raise MalformedFile(f"{out_dir} holds no gem eval run to resume (no {RUN_FILENAME} or {REPORT_FILENAME}); pass the --out folder of that run.")


def check_header(header: RunHeader) -> None:
    """Raise ValueError naming the first field of a run file that is not what ``gem eval`` writes: the
    file is data, so every count in it is bounded and every value typed before the run uses it.

    Raises:
        MalformedFile: if a field of the run file is missing, mistyped or out of bounds.
    """
    where = f"{header.path}: "
    for name in ("model", "backend"):
        value = getattr(header, name)
        if not isinstance(value, str) or len(value) > 10_000:
            raise MalformedFile(f"{where}{name} is not a name (a text of at most 10000 characters).")
    env_ids = header.env_ids
    if not env_ids or len(env_ids) > 10_000 or not all(isinstance(e, str) and len(e) <= 10_000 for e in env_ids):
        raise MalformedFile(f"{where}env_ids is not a list of env ids.")
    times = [header.started_at or "", *header.resumed_at]
    if len(times) > 100_000 or not all(isinstance(t, str) for t in times):
        raise MalformedFile(f"{where}started_at/resumed_at are not times.")
    check_settings(header.config, where=f"{where}config.", env_count=len(header.env_ids))
    backend = header.config.get("backend_settings") or {}
    if not isinstance(backend, dict):
        raise MalformedFile(f"{where}config.backend_settings is not an object.")
    for name in BACKEND_BOUNDS:
        if name in backend:
            problem = setting_problem(name, backend[name], BACKEND_BOUNDS)
            if problem:
                raise MalformedFile(f"{where}config.backend_settings.{name}: {problem}.")
    base_url = backend.get("base_url")
    if base_url is not None and not isinstance(base_url, str):
        raise MalformedFile(f"{where}config.backend_settings.base_url is not a URL.")
    judges = header.config.get("judges", {})
    if not isinstance(judges, dict) or not all(
        env_id in env_ids and isinstance(judge, dict) and set(judge) <= set(JUDGE_SETTINGS)
        and all(value is None or (isinstance(value, str) and len(value) <= 10_000) for value in judge.values())
        for env_id, judge in judges.items()
    ):
        raise MalformedFile(f"{where}config.judges is not {{env id: {{'model': name, 'rubric': digest or null}}}} for the run's envs.")


def check_resume(header: RunHeader, *, model: str, backend: str, env_ids: Sequence[str], settings: Mapping[str, Any]) -> None:
    """Raise :class:`ResumeMismatch` naming the first setting in which the resumed run differs.

    Raises:
        ResumeMismatch: if the model, the backend, the envs or an episode setting differs from the stored run.
    """
    if backend != header.backend:
        raise ResumeMismatch("backend", header.backend, backend, header.path)
    if model != header.model:
        raise ResumeMismatch("model", header.model, model, header.path)
    check_resumed_episodes(header, env_ids=env_ids, settings=settings)


def check_resumed_episodes(header: RunHeader, *, env_ids: Sequence[str], settings: Mapping[str, Any]) -> None:
    """The part of :func:`check_resume` that needs no model: the envs and the episode settings (checked
    before a model loads, which can take minutes, so a resume that asks for other episodes fails at once).

    A judged env's judge is an episode setting too (``settings["judges"]``, see :data:`JUDGE_SETTINGS`): another
    judge model or rubric would score the rest of the run by other standards. A run recorded before judges were
    (no ``judges`` in its ``config``) has none to compare.

    Raises:
        ResumeMismatch: if the envs, an episode setting or a judge differ from the stored run (a judge's as
            ``judge_model`` or ``judge_rubric``).
    """
    if list(env_ids) != list(header.env_ids):
        raise ResumeMismatch("env_ids", list(header.env_ids), list(env_ids), header.path)
    for name in EPISODE_SETTINGS:
        stored = header.config.get(name, _SETTING_DEFAULTS.get(name))
        if settings.get(name) != stored:
            raise ResumeMismatch(name, stored, settings.get(name), header.path)
    if "judges" in header.config:
        stored_judges, judges = header.config["judges"], settings.get("judges") or {}
        for env_id in header.env_ids:
            for name in JUDGE_SETTINGS:
                stored, requested = (stored_judges.get(env_id) or {}).get(name), (judges.get(env_id) or {}).get(name)
                if requested != stored:
                    raise ResumeMismatch(f"judge_{name}", stored, requested, header.path)
