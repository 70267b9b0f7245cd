"""Run a model on a set of envs and build the report: the engine behind ``gem eval``.

Training scripts call :func:`evaluate` (or :func:`evaluate_async` inside an event loop) with the
policy they hold; the CLI calls the same functions with a model loaded from ``--model``.

Episode ``i`` of every env uses seed ``config.seed + i`` (``config.samples`` episodes per seed, for
pass@k), so two models evaluated with the same settings play the same episodes. Episodes run
concurrently (``config.concurrency`` at once, across envs); a failing episode records its error and
the others go on. With an ``out_dir``, each finished
episode is appended to ``episodes.jsonl`` there (fsync'd) and ``report.json`` is rebuilt from that file
at the end, so a cancelled run (Ctrl-C, SIGTERM in the CLI) is written as a report marked
``interrupted``, and a full disk loses nothing that was already written. ``run.json`` there holds the
run's settings, so ``config.resume`` continues a run that was stopped in any way (even SIGKILL): it
plays only the episodes missing from ``episodes.jsonl`` (:mod:`gem_core.eval.resume`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import signal
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from gem_core import placement
from gem_core.env import Env
from gem_core.errors import InvalidArgument, InvalidArgumentType, did_you_mean
from gem_core.eval.bounds import base_url_problem, check_backend_settings
from gem_core.eval.config import EvalConfig
from gem_core.eval.episode_log import EPISODES_FILENAME, LOCK_FILENAME, EpisodeLog, ReportWriteError, read_episodes
from gem_core.eval.progress import EvalProgress
from gem_core.eval.report import REPORT_FILENAME, EpisodeRecord, EvalReport, fail_non_finite
from gem_core.eval.resume import RUN_FILENAME, check_resume, check_resumed_episodes, read_run_header, write_run_header
from gem_core.protocols import Tokenizer
from gem_core.registry import spec
from gem_core.transport.folder_lock import lock_folder, release_folder

__all__ = ["EvalConfig", "EpisodeBackend", "Interrupted", "evaluate", "evaluate_async", "judges_of", "make_backend", "remove_outputs", "write_outputs"]


class EpisodeBackend(Protocol):
    """Plays one episode with a model. :class:`~gem_core.eval.policy_backend.PolicyBackend` (token level)
    and :class:`~gem_core.eval.chat_backend.ChatBackend` (an HTTP chat endpoint) implement it."""

    kind: str
    model_name: str
    #: What the report records about the backend (endpoint, timeouts, device; never secrets).
    settings: dict[str, Any]

    async def run_episode(self, env: Env, env_id: str, seed: int, config: EvalConfig, record: EpisodeRecord) -> None:
        """Play the episode of ``seed`` and fill ``record``; raise on a backend failure."""
        ...

    async def aclose(self) -> None:
        """Release what the backend holds (HTTP clients, engines); called once when the run ends."""
        ...


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


async def evaluate_async(
    backend: EpisodeBackend,
    config: EvalConfig,
    *,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    env_overrides: Callable[[str], dict[str, Any]] | None = None,
) -> EvalReport:
    """Evaluate ``backend`` on ``config.env_ids``; see the module docstring.

    Args:
        on_episode: called with each finished (or failed) episode, e.g. to log it.
        env_overrides: ``env_id -> make() overrides`` for each episode's env (``gem eval --judge-url`` hands
            judged envs their judge this way); never stored in the run.

    Raises:
        asyncio.CancelledError: when cancelled, after writing the partial report to ``config.out_dir``.
    """
    if not config.env_ids:
        raise InvalidArgument("No env to evaluate: give at least one env id (e.g. env_ids=['game:Wordle-v0']).")
    for env_id in config.env_ids:
        spec(env_id)  # an unknown id fails now, with suggestions, not once per episode
    records: dict[str, list[EpisodeRecord]] = {env_id: [] for env_id in config.env_ids}
    report = EvalReport(
        model=backend.model_name,
        backend=backend.kind,
        config={**config.run_settings(), "backend_settings": dict(getattr(backend, "settings", {})),
                "judges": judges_of(config.env_ids, env_overrides)},
        env_ids=list(config.env_ids),
        episodes=records,
        started_at=_now(),
    )
    log = _open_run(config, report) if config.out_dir is not None else None
    done = {r.key for r in log.records} if log is not None else set()
    progress = EvalProgress(config.planned_episodes, enabled=config.progress, done=log.records if log is not None else ())
    # `concurrency` workers draw the plan one episode at a time: memory is that of the episodes in flight,
    # however many the run asks for.
    todo = (key for key in config.planned() if key not in done)

    async def play(env_id: str, seed: int, sample: int) -> None:
        record = EpisodeRecord(env_id=env_id, seed=seed, sample=sample)
        env = None
        try:
            overrides = env_overrides(env_id) if env_overrides is not None else {}
            env = placement.make_env(env_id, max_turns=config.max_turns, **overrides)  # the one turn limit, whatever the backend
            await backend.run_episode(env, env_id, seed, config, record)
        except Exception as exc:  # a failed episode is data for the report, never a crash
            record.error = f"{type(exc).__name__}: {exc}"
        finally:
            if env is not None:
                env.close()
        fail_non_finite(record)
        if log is not None:
            log.append(record)  # a write error (full disk) stops the run: see below
        records[env_id].append(record)
        progress.update(record)
        if on_episode is not None:
            on_episode(record)

    async def worker() -> None:
        for key in todo:  # one shared generator: each episode is drawn by exactly one worker
            await play(*key)

    workers = max(0, min(config.concurrency, config.planned_episodes - len(done)))
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        report.interrupted = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        progress.close()
        report.finished_at = _now()
        if log is not None:
            log.close()
            # The report is what reached the disk: the episodes the log holds.
            for env_records in records.values():
                env_records.clear()
            for record in read_episodes(log.path):
                records.setdefault(record.env_id, []).append(record)
        for env_records in records.values():
            env_records.sort(key=lambda r: (r.seed, r.sample))
        if config.out_dir is not None:
            try:
                write_outputs(report, config.out_dir, plots=config.plots)
            except OSError as exc:
                raise ReportWriteError(
                    f"cannot write {Path(config.out_dir) / REPORT_FILENAME} ({exc.strerror or exc}); the "
                    f"{report.episodes_finished} finished episodes are in {log.path if log is not None else config.out_dir}"
                ) from exc
    return report


def judges_of(env_ids: Sequence[str], env_overrides: Callable[[str], dict[str, Any]] | None) -> dict[str, dict[str, str | None]]:
    """``{env_id: {"model": the judge's model name, "rubric": the rubric's digest or None (the env's own)}}`` for each
    env that ``env_overrides`` hands a judge: what ``run.json`` records of the judges (never their URL or key), so a
    resume with another judge or rubric is refused instead of mixing two judges' verdicts in one report. An env whose
    overrides cannot be had is left out: each of its episodes fails on them anyway."""
    from gem_core.judge.rubric import Rubric

    judges: dict[str, dict[str, str | None]] = {}
    for env_id in env_ids:
        try:
            overrides = env_overrides(env_id) if env_overrides is not None else {}
            judge, rubric = overrides.get("judge"), overrides.get("rubric")
            model = getattr(judge, "model", type(judge).__name__) if judge is not None else overrides.get("judge_model")
            digest = None if rubric is None else Rubric.coerce(rubric).digest
        except Exception:  # noqa: BLE001 - the episodes report it, as they would without this record
            continue
        if model is not None:
            judges[env_id] = {"model": str(model), "rubric": digest}
    return judges


def _open_run(config: EvalConfig, report: EvalReport) -> EpisodeLog:
    """Take ``out_dir`` for this run, write its ``run.json`` and open its episode log; with ``config.resume``, first
    check that the run in ``out_dir`` asked for the same episodes, and take its start time and finished episodes.

    The folder is held (:func:`~gem_core.transport.folder_lock.lock_folder`) until the log is closed: two runs
    started together, or a resume while the run still played, both found no finished episode there, and their
    ``episodes.jsonl`` lines interleaved mid-record. Everything is read and checked before anything is written, so
    a refused resume leaves the folder as it was; a new run removes the replaced run's report and plots first, so
    a kill never leaves them beside its own episodes."""
    assert config.out_dir is not None
    out_dir = Path(config.out_dir)
    try:
        held = lock_folder(out_dir, LOCK_FILENAME, what="output folder", error=InvalidArgument,
                           why="two runs writing into one folder interleave their episodes.jsonl lines")
    except OSError as exc:
        raise ReportWriteError(f"cannot take {config.out_dir} for the run: {exc.strerror or exc}") from exc
    try:
        config.check_out_dir()
        if config.resume:
            header = read_run_header(config.out_dir)
            check_resume(header, model=report.model, backend=report.backend, env_ids=report.env_ids, settings=report.config)
            report.started_at, report.resumed_at = header.started_at, [*header.resumed_at, report.started_at or _now()]
        else:
            remove_outputs(out_dir)
        log = EpisodeLog(config.out_dir, resume=config.resume, held=held, plans=config.plans)
    except BaseException:
        release_folder(out_dir, LOCK_FILENAME, held)
        raise
    try:
        write_run_header(config.out_dir, report)
    except BaseException as exc:
        log.close()
        if isinstance(exc, OSError):
            raise ReportWriteError(f"cannot write the run's settings to {config.out_dir}: {exc.strerror or exc}") from exc
        raise
    return log


def remove_outputs(out_dir: str | Path, *, with_run: bool = False) -> None:
    """Remove the ``report.json`` and plots of the run ``out_dir`` held, before a new run (or report) replaces it:
    a new run stopped mid-way must not leave the old run's numbers beside its own episodes. ``with_run``: its
    ``run.json`` and ``episodes.jsonl`` too, for a report that brings no episode log (a re-scored one), since
    readers of the folder take the log over the report.

    Raises:
        ReportWriteError: if one of them cannot be removed (a read-only folder).
    """
    from gem_core.eval.plots import DISTRIBUTION_PLOT, SUMMARY_PLOT

    run_files = (RUN_FILENAME, EPISODES_FILENAME) if with_run else ()
    for name in (*run_files, REPORT_FILENAME, SUMMARY_PLOT, DISTRIBUTION_PLOT):
        try:
            (Path(out_dir) / name).unlink(missing_ok=True)
        except OSError as exc:
            raise ReportWriteError(f"cannot remove the replaced run's {Path(out_dir) / name}: {exc.strerror or exc}") from exc


def write_outputs(report: EvalReport, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write ``report.json`` (and the plots) into ``out_dir``; returns the paths written."""
    out_dir = Path(out_dir)
    paths = [report.save(out_dir / REPORT_FILENAME)]
    if plots:
        try:
            from gem_core.eval.plots import plot_report

            paths += plot_report(report, out_dir)
        except Exception as exc:  # the JSON is the result; a plotting problem must not lose it
            warnings.warn(f"gem eval: plots skipped ({type(exc).__name__}: {exc}); report.json is complete.", stacklevel=2)
    return paths


def make_backend(
    model: str | None = None,
    *,
    policy: Any = None,
    tokenizer: Tokenizer | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 3,
    max_in_flight: int = 32,
    extra_body: dict[str, Any] | None = None,
    device: str | None = None,
) -> EpisodeBackend:
    """The backend for one of three ways to name a model.

    * ``policy`` and ``tokenizer``: a Policy already in memory (a training script's model);
    * ``model`` and ``base_url``: ``model`` as served by an OpenAI-compatible endpoint;
    * ``model`` alone: a transformers model from a local path or a hub id, run in-process.

    ``model`` with ``policy`` is only the name the report gives the policy. More than one way (a policy and a
    ``base_url``), a ``tokenizer`` without its policy, a ``base_url`` that is not http(s):// or an HTTP option
    out of bounds is a ValueError naming them, before anything loads.

    Raises:
        InvalidArgument: if no way or more than one way names the model, or a setting is out of bounds.
        InvalidArgumentType: if ``api_key`` is not a str or ``extra_body`` not a dict (see :func:`check_backend_settings`).
    """
    if base_url is not None and (policy is not None or tokenizer is not None):
        raise InvalidArgument("make_backend: policy=/tokenizer= (a model in memory) and base_url= (a model served over HTTP) "
                         "are two ways to name a model; give one of them.")
    if tokenizer is not None and policy is None:
        raise InvalidArgument("make_backend: tokenizer= goes with policy= (the model in memory that uses it); without a policy, "
                         "model= names a model that brings its own tokenizer.")
    if base_url is not None:
        problem = base_url_problem(base_url)
        if problem:
            raise InvalidArgument(problem)
        check_backend_settings({"timeout": timeout, "max_retries": max_retries, "max_in_flight": max_in_flight,
                                "api_key": api_key, "extra_body": extra_body})
    if policy is not None:
        if tokenizer is None:
            raise InvalidArgument("A policy needs its tokenizer: pass tokenizer= (the one whose chat template it uses).")
        from gem_core.eval.policy_backend import PolicyBackend

        return PolicyBackend(policy, tokenizer, model_name=model or type(policy).__name__)
    if model is None:
        raise InvalidArgument("Name a model: model='path/or/hub-id' (with base_url= for an HTTP endpoint), or policy= and tokenizer=.")
    if base_url is not None:
        from gem_core.eval.chat_backend import ChatBackend

        return ChatBackend.from_url(
            base_url,
            model,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            max_in_flight=max_in_flight,
            extra_body=extra_body,
        )
    from gem_core.eval.policy_backend import PolicyBackend

    return PolicyBackend.from_pretrained(model, device=device)


def evaluate(
    env_ids: Sequence[str] | str,
    *,
    model: str | None = None,
    policy: Any = None,
    tokenizer: Tokenizer | None = None,
    base_url: str | None = None,
    backend: EpisodeBackend | None = None,
    backend_options: dict[str, Any] | None = None,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    stop_signals: Sequence[int] = (signal.SIGINT,),
    env_overrides: Callable[[str], dict[str, Any]] | None = None,
    **config: Any,
) -> EvalReport:
    """Evaluate a model on ``env_ids`` and return the :class:`EvalReport` (``report.to_dict()`` for JSON).

    The model is ``backend``, or what :func:`make_backend` builds from ``model``/``policy``/``tokenizer``/
    ``base_url`` (``backend_options`` go to it too: ``api_key``, ``timeout``, ``max_retries``, ...).
    ``env_overrides`` is passed to :func:`evaluate_async`. Other keyword arguments are :class:`EvalConfig` fields (``episodes=``, ``seed=``, ``out_dir=``, ...).
    A bad argument (a setting of the wrong type or out of bounds, a negative ``seed``, a ``backend_options``
    value out of bounds, a ``base_url`` that is not http(s)://, ``backend`` with another way to name the model)
    is a ValueError naming it, raised before any model loads or episode plays. So is an ``out_dir`` that already
    holds a run, unless ``resume=True`` (continue it) or ``overwrite=True`` (replace it).

    Runs its own event loop; inside one, ``await evaluate_async(backend, EvalConfig(...))`` instead.
    On a signal in ``stop_signals`` (Ctrl-C's SIGINT by default; the CLI adds SIGTERM and SIGHUP) the
    run is cancelled, the partial report is written to ``out_dir``, and :class:`Interrupted` (a
    ``KeyboardInterrupt`` carrying the signal number) propagates. They are the event loop's handlers
    (``loop.add_signal_handler``), not asyncio.run's Python-level SIGINT handler: those write to the
    loop's wakeup fd, so a signal that the kernel delivers to one of the env threads still wakes the
    loop at once instead of at its next timer (up to ``--timeout`` later while a request is held). A write error (a full disk)
    raises :class:`~gem_core.eval.episode_log.ReportWriteError` saying what is on disk and where.

    Raises:
        InvalidArgument: if an argument is out of bounds or the model is named twice (see above), before any
            model loads.
        InvalidArgumentType: if a keyword is none of the settings (a misspelt ``episode=``, a ``backend_options``
            key :func:`make_backend` does not take) or an argument is of the wrong kind (``env_ids=None``,
            ``out_dir=5``, ``backend_options={'api_key': 5}``); the message lists the accepted ones.
    """
    _check_keywords("evaluate got an unexpected keyword {!r}", config, _SETTINGS,
                    "its other keywords are EvalConfig's fields: {}; the model is model=, policy=, tokenizer=, base_url=, "
                    "backend= or backend_options=.")
    ids: Any = list(env_ids) if isinstance(env_ids, Iterable) and not isinstance(env_ids, str) else env_ids
    eval_config = EvalConfig(env_ids=ids, **config)  # which refuses env_ids of another kind, naming it
    for env_id in eval_config.env_ids:
        spec(env_id)  # an unknown id fails before a model loads (or a hub is asked for one)
    if backend is not None:
        other = [name for name, value in (("model", model), ("policy", policy), ("tokenizer", tokenizer),
                                          ("base_url", base_url), ("backend_options", backend_options or None))
                 if value is not None]
        if other:
            raise InvalidArgument(f"evaluate: backend= is the model; drop {'=, '.join(other)}= (they would build another one).")
    else:  # the backend's options fail here, named as the caller gave them, not once per episode
        if backend_options is not None and not isinstance(backend_options, Mapping):
            raise InvalidArgumentType(f"backend_options: {backend_options!r:.60} is not a dict; give e.g. "
                                      "backend_options={'timeout': 30.0}.")
        _check_keywords("backend_options[{!r}] is not an option of the model's backend", backend_options or {},
                        _BACKEND_OPTIONS, "the options are {}.")
        if base_url is not None:
            problem = base_url_problem(base_url)
            if problem:
                raise InvalidArgument(problem)
        check_backend_settings(backend_options or {}, label="backend_options[{name!r}]")
    eval_config.check_out_dir()  # a run already in out_dir is kept unless asked (before a model loads)
    if eval_config.resume and eval_config.out_dir is not None and backend is None:  # so does a resume asking for other episodes
        check_resumed_episodes(read_run_header(eval_config.out_dir), env_ids=eval_config.env_ids,
                               settings={**eval_config.run_settings(), "judges": judges_of(eval_config.env_ids, env_overrides)})
    if backend is None:
        backend = make_backend(model, policy=policy, tokenizer=tokenizer, base_url=base_url, **(backend_options or {}))
    received: list[int] = []

    async def run() -> EvalReport:
        loop, main, handled = asyncio.get_running_loop(), asyncio.current_task(), []

        def on_signal(signum: int) -> None:
            received.append(signum)
            if main is not None:  # always: run() is asyncio.run's task
                main.cancel()

        for signum in stop_signals:
            try:
                loop.add_signal_handler(signum, on_signal, signum)
            except (RuntimeError, ValueError, NotImplementedError):  # not the main thread, or not here (Windows)
                continue
            handled.append(signum)
        try:
            return await evaluate_async(backend, eval_config, on_episode=on_episode, env_overrides=env_overrides)
        finally:
            for signum in handled:
                loop.remove_signal_handler(signum)
            await backend.aclose()

    try:
        return asyncio.run(run())
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise


#: The keywords of :func:`evaluate` that are :class:`EvalConfig` settings.
_SETTINGS = [f.name for f in dataclasses.fields(EvalConfig) if f.name != "env_ids"]
#: The keywords ``backend_options`` may give :func:`make_backend` (the ways to name the model are evaluate's own).
_BACKEND_OPTIONS = [name for name in inspect.signature(make_backend).parameters
                    if name not in ("model", "policy", "tokenizer", "base_url")]


def _check_keywords(what: str, given: Mapping[str, Any], accepted: list[str], listed: str) -> None:
    """Refuse a keyword Python would refuse later as a bare TypeError naming neither the fix nor the choices:
    ``what`` names it (``{!r}`` is the keyword), ``listed`` the accepted ones (``{}``)."""
    for name in given:
        if name not in accepted:
            raise InvalidArgumentType(f"{what.format(name)}{did_you_mean(name, accepted)}; {listed.format(', '.join(accepted))}")


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal in ``stop_signals`` (after the partial report was written).

    Args:
        signum: the signal that stopped the run.
    """

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum
