"""The evaluation report: one record per episode, a summary per env, JSON in and out.

Every number in a summary is computed from the episode records stored next to it, so a report can be
re-checked (or re-summarized with other statistics) from its own transcripts.

Conventions (the same for every backend):

* **success**: the ``info["success"]`` of the episode's last step when the env reports one; otherwise
  the episode *terminated* (not truncated) with a positive return.
* **format-error rate**: turns answered with a format penalty (``info["format_error"]``) over all turns
  played in the env's completed episodes.
* **tokens**: ``prompt`` sums the context length of every model call (what an API bills), ``completion``
  sums the generated tokens. The HTTP backend reports the server's ``usage`` (zero when it sends none).
* **failed episodes** (the backend raised, e.g. a timeout after all retries) keep their partial
  transcript and the error, and are left out of every rate and mean: an infrastructure failure says
  nothing about the model. ``episodes_failed`` counts them.
* **pass@k and mean@k** (``--samples n``: ``n`` episodes per seed): for each seed with ``c`` successes
  among its ``n`` completed samples, pass@k is the unbiased estimator of Chen et al. (2021),
  ``1 - C(n-c, k) / C(n, k)`` (the chance that ``k`` of the ``n`` samples drawn without replacement hold a
  success), averaged over the seeds that have at least ``k`` completed samples. mean@k is the mean over
  seeds of each seed's success rate over its samples (the average accuracy; it equals pass@1).
* **confidence interval** of the mean return: a percentile bootstrap (``CI_RESAMPLES`` resamples of the
  episode returns, fixed RNG seed, so the same episodes give the same interval). It needs no normality
  assumption, which matters for the bounded, often bimodal returns of games.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gem_core.errors import InvalidArgument, MalformedFile
from gem_core.eval.bounds import check_settings
from gem_core.transport.atomic_file import atomic_path

__all__ = [
    "EpisodeRecord",
    "fail_non_finite",
    "step_error",
    "EnvSummary",
    "EvalReport",
    "bootstrap_mean_ci",
    "pass_at_k",
    "pass_at_k_values",
    "summarize_env",
    "REPORT_FILENAME",
    "CI_LEVEL",
    "CI_RESAMPLES",
]

REPORT_FILENAME = "report.json"
"""The file in an eval's output folder that holds the :class:`EvalReport` as JSON."""
REPORT_FORMAT_VERSION = 1
CI_LEVEL = 0.95
"""Confidence level of the bootstrap interval around each mean return."""
CI_RESAMPLES = 2000
"""Bootstrap resamples per confidence interval."""
_CI_SEED = 0


_COUNT = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a count (a whole number >= 0)")
_NUMBER = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v), "a finite number")


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float (a JSON integer past the largest float is not: float() overflows)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False

#: The type each stored field of an episode record must have, and how to say it.
_RECORD_FIELDS: dict[str, tuple[Any, str]] = {
    "env_id": (lambda v: isinstance(v, str), "an env id"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "sample": _COUNT,
    "rewards": (lambda v: isinstance(v, list), "a list of rewards"),
    "success": (lambda v: isinstance(v, bool), "true or false"),
    "format_errors": _COUNT,
    "terminated": (lambda v: isinstance(v, bool), "true or false"),
    "truncated": (lambda v: isinstance(v, bool), "true or false"),
    "prompt_tokens": _COUNT,
    "completion_tokens": _COUNT,
    "transcript": (lambda v: isinstance(v, list), "a list of messages"),
    "error": (lambda v: v is None or isinstance(v, str), "a text or null"),
}


def _is(value: Any, kind: tuple[Any, str]) -> bool:
    return bool(kind[0](value))


@dataclass
class EpisodeRecord:
    """One evaluated episode, with everything needed to recompute its env's summary."""

    env_id: str
    seed: int
    #: Which of the ``samples`` episodes of this seed (``--samples``), from 0.
    sample: int = 0
    rewards: list[float] = field(default_factory=list)
    success: bool = False
    format_errors: int = 0
    terminated: bool = False
    truncated: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: ``[{"role": "system"|"user"|"assistant", "content": str}, ...]`` as the model saw it.
    transcript: list[dict[str, str]] = field(default_factory=list)
    #: Why the episode stopped early (``"TimeoutError: ..."``); ``None`` for a completed episode.
    error: str | None = None

    @property
    def turns(self) -> int:
        """How many steps the episode took."""
        return len(self.rewards)

    @property
    def episode_return(self) -> float:
        """The sum of the episode's rewards (undiscounted)."""
        return float(sum(self.rewards))

    @property
    def failed(self) -> bool:
        """Whether the episode ended in an error (the backend or the env failed) instead of finishing."""
        return self.error is not None

    @property
    def key(self) -> tuple[str, int, int]:
        """``(env_id, seed, sample)``: which episode of the run this is (unique within a run)."""
        return self.env_id, self.seed, self.sample

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, with the derived ``turns`` and ``return`` added for readers of the file."""
        record = asdict(self)
        # Derived numbers are written too, so a reader of the JSON need not recompute them.
        record["turns"] = self.turns
        record["return"] = self.episode_return
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        """The record a :meth:`to_dict` dict holds; ValueError naming the first field of the wrong type
        (a file is data: a bad record must not surface as a TypeError in a summary later).

        Raises:
            MalformedFile: if ``data`` is not an object, lacks ``env_id`` or ``seed``, or a field has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise MalformedFile(f"an episode record is a JSON object, not a {type(data).__name__}.")
        names = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in names}
        for name, kind in _RECORD_FIELDS.items():
            if name in values and not _is(values[name], kind):
                raise MalformedFile(f"episode field {name!r} is {values[name]!r:.60}, not {kind[1]}.")
        if "env_id" not in values or "seed" not in values:
            raise MalformedFile("an episode record needs env_id and seed.")
        rewards = values.get("rewards", [])
        if not all(_is(r, _NUMBER) for r in rewards):
            raise MalformedFile("episode field 'rewards' holds a value that is not a finite number.")
        if not math.isfinite(sum(float(r) for r in rewards)):  # the return, which every summary and the JSON need
            raise MalformedFile("episode field 'rewards' sums past the largest float; each reward must be finite, and so their sum.")
        transcript = values.get("transcript", [])
        if not all(isinstance(m, Mapping) and all(isinstance(v, str) for v in m.values()) for m in transcript):
            raise MalformedFile("episode field 'transcript' holds a message that is not {role: text, content: text}.")
        values["rewards"] = [float(r) for r in rewards]
        return cls(**values)


def fail_non_finite(record: EpisodeRecord) -> None:
    """Fail an episode whose rewards are not all finite (NaN, inf, or a sum that overflows), keeping the turns
    before: JSON holds no such number, so the episode could not be logged, and one of them poisons every mean.
    Applied where every episode's record ends: a live run's (whatever the backend; the HTTP backend passes the env's
    reward on as it is) and a re-scored one's (``gem eval --rescore``)."""
    total = 0.0
    for turn, reward in enumerate(record.rewards, 1):
        try:
            value = float(reward)
        except (TypeError, ValueError, OverflowError):
            value = math.nan
        total += value
        if math.isfinite(total):
            continue
        what = f"the reward of turn {turn} is {reward!r:.60}" if not math.isfinite(value) else f"the rewards up to turn {turn} sum to {total}"
        problem = f"{record.env_id} seed {record.seed}: {what}, which is not finite; rewards must be finite numbers"
        record.error = problem if record.error is None else f"{problem}; then {record.error}"
        del record.rewards[turn - 1 :]
        return


def step_error(infos: Sequence[dict[str, Any]]) -> str | None:
    """Why an episode failed at a step (None when no step did): the last step info's ``"error"``.

    The one rule of every backend: an env whose step raised (the session's ``info["error"]``) or a judge
    that gave no verdict (the judged env's ``info["error"]``, paid as 0) fails the episode, so its reward
    of 0 never counts in the rates as a real score.
    """
    errors = [info["error"] for info in infos if isinstance(info, dict) and info.get("error")]
    return f"env step failed: {errors[-1]}" if errors else None


def bootstrap_mean_ci(
    values: Sequence[float], *, level: float = CI_LEVEL, resamples: int = CI_RESAMPLES, seed: int = _CI_SEED
) -> tuple[float, float] | None:
    """Percentile-bootstrap confidence interval of the mean of ``values``; ``None`` for no values."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    if data.size == 1 or np.all(data == data[0]):
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    scale = _sum_scale(data)  # the draws depend on the size alone: scaled or not, the same resamples
    means = rng.choice(data * scale, size=(resamples, data.size), replace=True).mean(axis=1)
    alpha = (1.0 - level) / 2.0
    with np.errstate(over="ignore"):  # a bound scaled back past the largest float is clipped to the data
        low, high = np.quantile(means, [alpha, 1.0 - alpha]) / scale
    if scale != 1.0:
        low, high = np.clip([low, high], data.min(), data.max())
    return float(low), float(high)


def _sum_scale(data: np.ndarray) -> float:
    """1.0, or the power of two that brings every value of ``data`` below 1 when their sum could pass the
    largest float.

    Finite returns of 1e308 sum to inf, though their mean is finite: a report with an infinite mean or interval
    could not be saved (JSON has no inf) after all its episodes had run. Scaling by a power of two is exact, so
    the mean and interval of the scaled values, scaled back, are what they would be without the overflow;
    values that cannot overflow are not scaled, and keep the very numbers they had.
    """
    peak = float(np.max(np.abs(data)))
    if math.isfinite(peak * data.size):
        return 1.0
    return math.ldexp(1.0, -math.frexp(peak)[1])


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` successes in ``n`` samples (Chen et al., 2021).

    ``1 - C(n-c, k) / C(n, k)`` computed as ``1 - prod_{i=n-c+1..n} (1 - k/i)``: the binomials overflow a
    float for a few hundred samples, the product of ``c`` factors in (0, 1] does not.

    Raises:
        InvalidArgument: unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise InvalidArgument(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")
    if n - c < k:  # every k-subset holds a success
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_values(samples: int) -> list[int]:
    """The k reported for ``samples`` samples per seed: the powers of two below it, and ``samples``."""
    ks, k = [], 1
    while k < samples:
        ks.append(k)
        k *= 2
    return [*ks, samples]


@dataclass
class EnvSummary:
    """Aggregate numbers for one env; rates and means cover completed episodes only."""

    env_id: str
    episodes_requested: int
    episodes_completed: int
    episodes_failed: int
    success_rate: float | None
    mean_return: float | None
    return_ci: tuple[float, float] | None
    mean_turns: float | None
    format_error_rate: float | None
    prompt_tokens: int
    completion_tokens: int
    #: Episodes per seed (``--samples``).
    samples: int = 1
    #: ``{"1": pass@1, "2": pass@2, ..., str(samples): pass@samples}``; ``None`` where no seed has k completed samples.
    pass_at_k: dict[str, float | None] = field(default_factory=dict)
    mean_at_k: float | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens over the env's episodes."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict (``total_tokens`` included)."""
        data = asdict(self)
        data["return_ci"] = list(self.return_ci) if self.return_ci is not None else None
        data["total_tokens"] = self.total_tokens
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvSummary:
        """The summary a :meth:`to_dict` dict holds (unknown keys ignored)."""
        names = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in names}
        if values.get("return_ci") is not None:
            values["return_ci"] = tuple(values["return_ci"])
        return cls(**values)


def _mean(values: Iterable[float]) -> float | None:
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return None
    scale = _sum_scale(data)
    if scale == 1.0:
        return float(np.mean(data))
    # Scaled back, a mean that rounded up to the largest float's next power of two would be inf: the mean
    # of the values lies between the least and the greatest of them, where it is finite.
    with np.errstate(over="ignore"):
        return float(np.clip(np.mean(data * scale) / scale, data.min(), data.max()))


def summarize_env(env_id: str, records: Sequence[EpisodeRecord], episodes_requested: int, samples: int = 1) -> EnvSummary:
    """The :class:`EnvSummary` of ``records`` (all from ``env_id``, ``samples`` per seed)."""
    completed = [r for r in records if not r.failed]
    by_seed: dict[int, list[bool]] = {}
    for r in completed:
        by_seed.setdefault(r.seed, []).append(r.success)
    pass_at = {}
    for k in pass_at_k_values(samples):
        estimates = [pass_at_k(len(wins), sum(wins), k) for wins in by_seed.values() if len(wins) >= k]
        pass_at[str(k)] = _mean(estimates)
    total_turns = sum(r.turns for r in completed)
    returns = [r.episode_return for r in completed]
    return EnvSummary(
        env_id=env_id,
        episodes_requested=episodes_requested,
        episodes_completed=len(completed),
        episodes_failed=sum(r.failed for r in records),
        success_rate=_mean(float(r.success) for r in completed),
        mean_return=_mean(returns),
        return_ci=bootstrap_mean_ci(returns),
        mean_turns=_mean(r.turns for r in completed),
        format_error_rate=(sum(r.format_errors for r in completed) / total_turns) if total_turns else None,
        # Tokens are spent by failed episodes too, so they count here.
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        samples=samples,
        pass_at_k=pass_at,
        mean_at_k=_mean(float(np.mean(wins)) for wins in by_seed.values()),
    )


@dataclass
class EvalReport:
    """What ``gem eval`` writes: run settings, a summary per env, and every episode."""

    model: str
    backend: str
    config: dict[str, Any]
    env_ids: list[str]
    episodes: dict[str, list[EpisodeRecord]]
    interrupted: bool = False
    started_at: str | None = None
    finished_at: str | None = None
    #: When ``--resume`` continued this run (one time per resume).
    resumed_at: list[str] = field(default_factory=list)
    #: Set by ``--rescore``: the source report and every episode whose reward, success or end changed.
    rescore: dict[str, Any] | None = None

    @property
    def samples(self) -> int:
        """Samples per seed (the run's ``samples`` setting, default 1)."""
        return int(self.config.get("samples", 1))

    def summary(self, env_id: str) -> EnvSummary:
        """The :class:`EnvSummary` of ``env_id`` over its recorded episodes (none recorded: an empty summary)."""
        return summarize_env(
            env_id, self.episodes.get(env_id, []), self.config.get("episodes", 0) * self.samples, self.samples
        )

    @property
    def episodes_finished(self) -> int:
        """Episodes recorded (completed or failed)."""
        return sum(len(records) for records in self.episodes.values())

    def failed_episodes(self) -> list[EpisodeRecord]:
        """The episodes that ended in an error, in env order."""
        return [r for env_id in self.env_ids for r in self.episodes.get(env_id, []) if r.failed]

    @property
    def summaries(self) -> dict[str, EnvSummary]:
        """``{env_id: EnvSummary}`` for every env of the run."""
        return {env_id: self.summary(env_id) for env_id in self.env_ids}

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (what ``report.json`` holds; :meth:`from_dict` reads it back)."""
        extra: dict[str, Any] = {}
        if self.resumed_at:
            extra["resumed_at"] = list(self.resumed_at)
        if self.rescore is not None:
            extra["rescore"] = self.rescore
        return {
            "format_version": REPORT_FORMAT_VERSION,
            "model": self.model,
            "backend": self.backend,
            "config": self.config,
            "interrupted": self.interrupted,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "statistics": {
                "return_ci": {"method": "percentile bootstrap", "level": CI_LEVEL, "resamples": CI_RESAMPLES},
                "success": "info['success'] of the last step, else terminated with a positive return",
                "format_error_rate": "format-error turns / turns, completed episodes",
                "failed_episodes": "kept with their error; excluded from rates and means",
                "pass_at_k": "unbiased estimator 1 - C(n-c,k)/C(n,k) per seed (Chen et al. 2021), mean over seeds",
                "mean_at_k": "per-seed success rate over its samples, mean over seeds",
            },
            **extra,
            "envs": {
                env_id: {
                    "summary": self.summary(env_id).to_dict(),
                    "episodes": [r.to_dict() for r in self.episodes.get(env_id, [])],
                }
                for env_id in self.env_ids
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalReport:
        """The report a :meth:`to_dict` dict holds.

        Raises:
            MalformedFile: if ``data`` is not a gem eval report of this format version, or a part of it has the
                wrong shape.
        """
        envs = data.get("envs") if isinstance(data, Mapping) else None
        if not isinstance(envs, Mapping) or data.get("format_version") != REPORT_FORMAT_VERSION:
            found = data.get("format_version") if isinstance(data, Mapping) else type(data).__name__
            raise MalformedFile(
                f"Not a gem eval report (format_version={found!r}, expected "
                f"{REPORT_FORMAT_VERSION}); pass the report.json that `gem eval --out DIR` wrote."
            )
        if not all(isinstance(env, Mapping) and isinstance(env.get("episodes"), list) for env in envs.values()):
            raise MalformedFile("A gem eval report whose envs hold no episode lists; pass the report.json that `gem eval` wrote.")
        if not isinstance(data.get("config", {}), Mapping):
            raise MalformedFile("A gem eval report whose config is not an object.")
        # The summaries multiply these counts: a report is a file, so they are bounded before use.
        check_settings(data.get("config", {}), where="report config.", env_count=len(envs))
        resumed_at = data.get("resumed_at", [])
        if not isinstance(resumed_at, list) or not all(isinstance(t, str) for t in resumed_at):
            raise MalformedFile(f"A gem eval report whose resumed_at is {resumed_at!r:.60}, not a list of times (texts).")
        if not isinstance(data.get("interrupted", False), bool):
            raise MalformedFile(f"A gem eval report whose interrupted is {data.get('interrupted')!r:.60}, not true or false.")
        for name in ("started_at", "finished_at"):
            if not isinstance(data.get(name), (str, type(None))):
                raise MalformedFile(f"A gem eval report whose {name} is {data.get(name)!r:.60}, not a time (a text) or null.")
        return cls(
            model=data.get("model", "?"),
            backend=data.get("backend", "?"),
            config=dict(data.get("config", {})),
            env_ids=list(envs),
            episodes={env_id: [EpisodeRecord.from_dict(r) for r in env["episodes"]] for env_id, env in envs.items()},
            interrupted=data.get("interrupted", False),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            resumed_at=list(resumed_at),
            rescore=data.get("rescore"),
        )

    def save(self, path: str | Path) -> Path:
        """Write the report as JSON (atomically: a Ctrl-C mid-write never leaves half a file)."""
        path = Path(path)
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False, default=_json_default)
        with atomic_path(path) as partial:
            partial.write_text(text, encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        """Read a report from ``path``: a ``report.json`` or the folder ``gem eval --out`` wrote.

        Raises:
            MalformedFile: if the file is not valid JSON or not a gem eval report.
        """
        path = Path(path)
        if path.is_dir():
            path = path / REPORT_FILENAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except RecursionError:
            raise MalformedFile(f"{path} is nested too deeply to be a gem eval report.") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedFile(f"{path} is not valid JSON ({exc}).") from None
        return cls.from_dict(data)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if math.isnan(value) else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
