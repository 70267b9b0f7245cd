"""SkyRL-Gym both ways, through ``skyrl_gym``'s own registry and classes (``pip install -e ".[skyrl]"``).

- ``make("skyrl:<id>", row=... | rows=... | data_file=...)`` is :class:`SkyRLEnv`: any env in SkyRL-Gym's
  registry (``gsm8k``, ``gsm8k_multi_turn``, ``aime``, ``lcb``, ``text2sql``, ``search``, ``searchcode``, or
  one a user registered there) as a GEM env, so every GEM adapter trains it through the token-exact path.
- :func:`register_gem_envs` puts GEM envs into SkyRL-Gym's registry (:class:`GemSkyRLEnv`), so
  ``skyrl_gym.make("game:GuessTheNumber-v0", env_config=..., extras=...)`` and SkyRL's trainer play them.

How the contracts map. A SkyRL-Gym env is built per task (``make(id, env_config=, extras=)``: the dataset
row's fields other than ``prompt`` and ``env_class`` are its ``extras``, as SkyRL-train passes them), started
with ``init(prompt)`` (a chat, returned as the first chat) and stepped with the model's text, answering an
``EnvStepOutput`` (``observations``: new chat messages; ``reward``; ``done``; ``metadata``). Here:

- the observation is the messages' contents, joined by a blank line (a system message included: GEM
  observations are text; the rollout puts the text in one user turn);
- each step's ``reward`` is that turn's GEM reward, unchanged (SkyRL's own reward functions score it);
- ``done`` is "the episode has ended" in SkyRL-Gym's docs, the env's own end (an answer, its own turn
  budget): it maps to ``terminated``. ``truncated`` comes from GEM's turn limit (``make(id, max_turns=N)``)
  and from a step that raised: that episode ends with ``info["error"]``, the rest of a batch plays on;
- the env's tool groups run its tools inside ``step`` as in SkyRL (their names and tools are in the
  reset's ``info["skyrl_tool_groups"]``);
- ``metadata`` is ``info``; the env's ``get_metrics()`` arrives in ``info["skyrl_metrics"]`` at the end,
  and :func:`aggregate_metrics` is SkyRL's own aggregation over episodes.

Envs that need something this machine may not have say so when built: ``text2sql`` a SQL database folder
(``env_config={"db_path": ...}``), ``search`` a Search-R1 retrieval server (``env_config={"search_url":
...}``; ``gem-retrieval-server`` speaks that protocol), and any env whose constructor fails to reach the
network.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import numbers
import socket
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from gem_core.env import Env, StepResult, log_error_once
from gem_core.errors import DependencyNotInstalled, GemError, InvalidArgumentType, causes

try:
    import skyrl_gym
    from omegaconf import DictConfig, OmegaConf
    from skyrl_gym.envs.base_text_env import BaseTextEnv
except ImportError as error:  # pragma: no cover - the extra is missing
    raise DependencyNotInstalled(f'skyrl:* envs need SkyRL-Gym ({error}): pip install -e ".[skyrl]"') from error

__all__ = ["SkyRLEnv", "GemSkyRLEnv", "register_gem_envs", "aggregate_metrics", "SkyRLTaskError", "SkyRLEnvUnavailable", "PREFIX"]

PREFIX = "skyrl:"
"""The id prefix that makes a SkyRL-Gym env: ``make("skyrl:<env name>")``."""
log = logging.getLogger(__name__)

#: SkyRL-Gym's config dataclasses for its envs that read ``env_config``; a user's dict overrides their fields.
_DEFAULT_CONFIGS = {
    "text2sql": "skyrl_gym.envs.sql.env:Text2SQLEnvConfig",
    "search": "skyrl_gym.envs.search.env:SearchEnvConfig",
}
#: Envs whose every tool call goes to a service: (its ``env_config`` key, what it is, how to get one).
_NEEDS_SERVICE = {
    "search": ("search_url", "a Search-R1 retrieval server",
               "start one (`gem-retrieval-server --corpus CORPUS.jsonl` serves that protocol at SkyRL's default "
               "http://127.0.0.1:8000/retrieve) or pass env_config={'search_url': 'http://HOST:PORT/retrieve'}"),
}
_ROW_HELP = ("a task row reads like SkyRL-train's dataset rows: {'prompt': [{'role': 'user', 'content': ...}], "
             "'reward_spec': {'method': 'rule', 'ground_truth': ...}, 'extra_info': {...}} (the fields besides prompt "
             "and env_class are the env's extras)")


class SkyRLTaskError(GemError, ValueError):
    """A ``skyrl:`` env got no task, or a task row without the fields the SkyRL-Gym env reads, or the SkyRL-Gym
    env's ``init`` gave back something other than ``(observations, metadata)``."""


class SkyRLEnvUnavailable(GemError, RuntimeError):
    """A ``skyrl:`` env needs something this machine lacks (a database file, a server, the network)."""


def _skyrl_ids() -> list[str]:
    return sorted(skyrl_gym.registry)


def _check_registered(skyrl_id: str) -> None:
    from gem_core.registry import UnknownEnvError

    if skyrl_id not in skyrl_gym.registry:
        raise UnknownEnvError(
            f"{PREFIX}{skyrl_id}: SkyRL-Gym has no env registered as {skyrl_id!r}; it has {', '.join(_skyrl_ids())}. "
            "An env of your own must be registered with skyrl_gym.register(...) (import the module that does) before make()."
        )


def _load_rows(data_file: str | Path) -> list[dict[str, Any]]:
    """Task rows from a local ``.jsonl``, ``.json`` (a list) or ``.parquet`` file (SkyRL's dataset format)."""
    path = Path(data_file)
    if not path.is_file():
        raise SkyRLTaskError(f"skyrl: data_file {str(path)!r} is not a file; pass a .jsonl, .json or .parquet file of task rows.")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # the datasets extra brings it; SkyRL's prepared datasets are parquet

        return pq.read_table(path).to_pylist()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SkyRLTaskError(
            f"skyrl: {path} is not UTF-8 text (byte {error.start} cannot be decoded); a data_file is a .jsonl, .json or .parquet file of task rows."
        ) from None
    if path.suffix == ".json":
        rows = _json(path, text, 0)
    else:  # "\n" only: a JSON string may hold the other characters str.splitlines() breaks at
        rows = [_json(path, line, number) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SkyRLTaskError(f"skyrl: {path} must hold a list of task rows (JSON objects); {_ROW_HELP}.")
    return rows


def _json(path: Path, text: str, line: int) -> Any:
    """``text`` (line ``line`` of ``path``, or the whole file when 0) parsed, or an error naming the file and line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = line or error.lineno
        raise SkyRLTaskError(f"skyrl: {path}:{where}: not JSON ({error.msg}, column {error.colno}); {_ROW_HELP}.") from None


def _text(messages: Any) -> str:
    """A chat (list of messages), one message or a string as observation text."""
    if isinstance(messages, str):
        return messages
    if isinstance(messages, Mapping):
        messages = [messages]
    return "\n\n".join(str(m.get("content", "")) for m in messages or () if isinstance(m, Mapping))


def _config(skyrl_id: str, env_config: Mapping[str, Any] | DictConfig | None) -> DictConfig:
    if isinstance(env_config, DictConfig):
        return env_config
    overrides = dict(env_config or {})
    default = _DEFAULT_CONFIGS.get(skyrl_id)
    if default is None:
        return OmegaConf.create(overrides)
    module, _, name = default.partition(":")
    import dataclasses
    import importlib

    fields = dataclasses.asdict(getattr(importlib.import_module(module), name)())
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise SkyRLTaskError(f"{PREFIX}{skyrl_id}: env_config has no field {unknown[0]!r}; it has {sorted(fields)}.")
    return OmegaConf.create({**fields, **overrides})


def _reachable(url: str, timeout: float = 2.0) -> bool:
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


class SkyRLEnv(Env):
    """A SkyRL-Gym env as a GEM env: ``make("skyrl:gsm8k", row={...})`` (see the module docstring).

    Args:
        skyrl_id: the id in SkyRL-Gym's registry (``make`` passes what follows ``skyrl:``).
        row: one task (a SkyRL-train dataset row: ``prompt``, ``reward_spec``, ``extra_info``, ...).
        rows: several tasks; :meth:`reset` draws one with its seed (``options={"index": i}`` picks one).
        data_file: a local ``.jsonl``/``.json``/``.parquet`` file of task rows, read once.
        env_config: the env's ``env_config`` (a dict over SkyRL's config dataclass where it has one).

    Raises:
        UnknownEnvError: SkyRL-Gym has no such env.
        SkyRLTaskError: no task was given, a row is not a mapping, a ``data_file`` line is not JSON (its file and
            line named), or ``env_config`` is not a mapping or names a field the env does not have.
    """

    max_step_seconds = 30.0  # lcb runs the model's code against its tests; search calls a server

    def __init__(
        self,
        skyrl_id: str,
        *,
        row: Mapping[str, Any] | None = None,
        rows: Sequence[Mapping[str, Any]] | None = None,
        data_file: str | Path | None = None,
        env_config: Mapping[str, Any] | DictConfig | None = None,
    ):
        _check_registered(skyrl_id)
        self.skyrl_id, self.name = skyrl_id, PREFIX + skyrl_id
        given = [name for name, value in (("row", row), ("rows", rows), ("data_file", data_file)) if value is not None]
        if len(given) != 1:
            raise SkyRLTaskError(
                f"{self.name}: pass exactly one task source, row={{...}}, rows=[...] or data_file='tasks.jsonl' "
                f"(got {', '.join(given) or 'none'}); {_ROW_HELP}."
            )
        if row is not None and not isinstance(row, Mapping):
            raise SkyRLTaskError(f"{self.name}: row is a {type(row).__name__}, not a task row; {_ROW_HELP}.")
        if env_config is not None and not isinstance(env_config, (Mapping, DictConfig)):
            raise SkyRLTaskError(f"{self.name}: env_config is a {type(env_config).__name__}, not a mapping of the env's config fields.")
        if rows is not None:
            for number, r in enumerate(rows):
                if not isinstance(r, Mapping):
                    raise SkyRLTaskError(f"{self.name}: rows[{number}] is a {type(r).__name__}, not a task row; {_ROW_HELP}.")
        self.rows = ([dict(row)] if row is not None else [dict(r) for r in rows] if rows is not None
                     else _load_rows(data_file) if data_file is not None else [])  # exactly one is given (checked above)
        if not self.rows:
            raise SkyRLTaskError(f"{self.name}: the task source holds no rows; {_ROW_HELP}.")
        self.env_config = _config(skyrl_id, env_config)
        self.env: BaseTextEnv | None = None
        self.row: dict[str, Any] | None = None

    def _build(self, row: dict[str, Any]) -> Any:
        """``skyrl_gym.make`` for one task, its failures said as what the env needs."""
        if "prompt" not in row:
            raise SkyRLTaskError(f"{self.name}: the task row has no 'prompt' (it has {sorted(row)}); {_ROW_HELP}.")
        extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
        needs = _NEEDS_SERVICE.get(self.skyrl_id)
        if needs is not None:
            key, what, fix = needs
            url = str(self.env_config.get(key, ""))
            if not _reachable(url):
                raise SkyRLEnvUnavailable(f"{self.name} needs {what}; none answers at {url}: {fix}.")
        try:
            return skyrl_gym.make(self.skyrl_id, env_config=self.env_config, extras=extras)
        except FileNotFoundError as error:
            if self.skyrl_id == "text2sql":
                raise SkyRLEnvUnavailable(
                    f"{self.name} needs a SQL database file: {error}. Download the SkyRL-SQL databases and pass "
                    "env_config={'db_path': FOLDER}, where FOLDER/<spider/database|bird/train/train_databases|"
                    "SynSQL-2.5M/databases>/<db_id>/<db_id>.sqlite exists for the row's data and db_id."
                ) from error
            raise SkyRLEnvUnavailable(f"{self.name} needs a file that is not there: {error}.") from error
        except (AssertionError, KeyError, NotImplementedError) as error:
            detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            raise SkyRLTaskError(f"{self.name}: the task row does not fit the env ({detail}); {_ROW_HELP}.") from error
        except Exception as error:
            if any(isinstance(e, (ConnectionError, TimeoutError, socket.gaierror)) or type(e).__module__.startswith("requests")
                   for e in causes(error)):
                raise SkyRLEnvUnavailable(
                    f"{self.name}: its constructor needs the network and could not reach it ({type(error).__name__}: {error}); "
                    "run it where that service is reachable, or point its env_config at a local copy."
                ) from error
            raise

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Build the SkyRL env for one task (``options={"index": i}``, or drawn with ``seed``) and ``init`` it.

        Raises:
            InvalidArgumentType: ``options["index"]`` is not an integer.
            SkyRLTaskError: the task row lacks what the env reads, or the env's ``init`` gives back a malformed
                ``(observations, metadata)``.
            SkyRLEnvUnavailable: the env needs a server, file or network this machine lacks.
        """
        super().reset(seed=seed)
        self.close_episode()
        options = options or {}
        if "index" in options:
            try:
                index = int(options["index"]) % len(self.rows)
            except (TypeError, ValueError, OverflowError):
                raise InvalidArgumentType(
                    f"{self.name}: options['index'] must be an integer (the task row's position, 0 to {len(self.rows) - 1}), "
                    f"got {options['index']!r}"
                ) from None
        else:
            index = int(self.np_random.integers(len(self.rows))) if len(self.rows) > 1 else 0
        self.row = self.rows[index]
        self.env = self._build(self.row)
        prompt = self.row["prompt"]
        result = self.env.init(prompt)
        pair = isinstance(result, tuple | list) and len(result) == 2
        observations, metadata = result if pair else (None, None)
        if not pair or not isinstance(metadata, Mapping | None) or not isinstance(observations, str | Mapping | Sequence | None):
            # a broken env's init: refused naming it here, not as a bare TypeError where the result is read
            self.close_episode()
            raise SkyRLTaskError(
                f"{self.name}: its init(prompt) must give back (observations, metadata dict), "
                f"got {type(result).__name__} {str(result)[:120]!r}"
            )
        info = {"task_index": index, **dict(metadata or {})}
        groups = getattr(self.env, "tool_groups", None) or []
        if groups:  # the env runs its tools itself; the policy's prompt may need to name them
            info["skyrl_tool_groups"] = {group.get_name(): group.get_tool_names() for group in groups}
        return _text(observations), info

    def step(self, action: str) -> StepResult:
        if self.env is None:
            return "", 0.0, False, True, {"error": f"{self.name}: no episode; call reset() first"}
        # The whole reading of the env's output is guarded too: a reward of the wrong type, a non-finite reward,
        # an output that is not a dict or a get_metrics that raises is that env's bug, and ends its episode only.
        message = None
        try:
            output = self.env.step(action)
            if not isinstance(output, Mapping):
                message = f"{self.name}: step gave back a {type(output).__name__}, not a dict"
            else:
                reward = float(output.get("reward") or 0.0)
                if not math.isfinite(reward):
                    message = f"{self.name}: step gave reward {reward}, not a finite number"
                info = dict(output.get("metadata") or {})
                if output.get("postprocessed_action") is not None:
                    info["postprocessed_action"] = output["postprocessed_action"]
                done = bool(output.get("done", False))
                if done and message is None:
                    get_metrics = getattr(self.env, "get_metrics", None)
                    info["skyrl_metrics"] = dict(get_metrics() or {}) if callable(get_metrics) else {}
                observation = _text(output.get("observations"))
        except Exception as error:  # one env's bug ends its episode, not the batch it plays in
            message = f"{self.name}: step raised {type(error).__name__}: {error}"
        if message is not None:
            log_error_once(self, message)
            self.close_episode()
            return "", 0.0, False, True, {"error": message}
        return observation, reward, done, False, info

    def sample_random_action(self) -> str:
        raise NotImplementedError(f"{self.name}: SkyRL-Gym envs have no random action; a policy writes the text.")

    def close_episode(self) -> None:
        """Close the current task's SkyRL-Gym env, if one is open; the next :meth:`reset` builds a fresh one."""
        if self.env is not None:
            env, self.env = self.env, None
            env.close()

    def close(self) -> None:
        """Close the current task's env, then this env."""
        self.close_episode()
        super().close()


def aggregate_metrics(skyrl_id: str, metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """SkyRL-Gym's own aggregation of per-episode ``info["skyrl_metrics"]`` for env ``skyrl_id``."""
    from skyrl_gym.metrics import aggregate_for_environment

    _check_registered(skyrl_id.removeprefix(PREFIX))
    return aggregate_for_environment(skyrl_id.removeprefix(PREFIX), metrics)


class GemSkyRLEnv(BaseTextEnv):
    """A GEM env as a SkyRL-Gym env, one per task as SkyRL builds them (registered by :func:`register_gem_envs`).

    ``extras`` (the dataset row's fields) may hold ``seed`` and ``options`` for GEM's ``reset`` and
    ``max_turns``; ``env_config`` may hold ``make_kwargs`` for GEM's ``make``. ``init(prompt)`` keeps the
    prompt's system messages and adds GEM's first observation as the user message; each ``step`` answers
    GEM's observation as one user message, GEM's reward, ``done = terminated or truncated`` and GEM's info
    (with ``terminated``/``truncated``) as metadata. A GEM env that raises ends that episode with
    ``metadata["error"]`` instead of failing SkyRL's whole generation batch.

    Args:
        env_config: SkyRL's env config; may hold ``make_kwargs`` for GEM's ``make``.
        extras: the dataset row's fields; may hold ``seed``, ``options`` and ``max_turns``.
        gem_env_id: the GEM id to build (bound by :func:`register_gem_envs`).

    A row's ``max_turns`` (one task's limit) overrides a ``max_turns`` in ``make_kwargs`` (the config's default).

    Raises:
        SkyRLTaskError: the row's ``max_turns`` is not a whole number of at least 1, or ``env_config``,
            ``extras`` or ``make_kwargs`` is not a mapping.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None, *, gem_env_id: str):
        super().__init__()
        from gem_core.registry import make

        config = OmegaConf.to_container(env_config, resolve=True) if isinstance(env_config, DictConfig) else env_config or {}
        make_kwargs = config.get("make_kwargs") or {} if isinstance(config, Mapping) else None
        for name, value in (("env_config", config), ("extras", extras or {}), ("env_config['make_kwargs']", make_kwargs)):
            if not isinstance(value, Mapping):
                raise SkyRLTaskError(f"{gem_env_id}: {name} must be a mapping, got a {type(value).__name__}.")
        extras, make_kwargs = dict(extras or {}), dict(make_kwargs or {})
        self.gem_env_id = gem_env_id
        self.seed, self.options = extras.get("seed"), extras.get("options")
        limit = extras.get("max_turns")
        if limit is not None:
            # 2.9 is no number of turns (int() read it as 2); 3.0 from a column of floats is 3.
            whole = isinstance(limit, numbers.Integral) or (isinstance(limit, float) and limit.is_integer())
            if isinstance(limit, bool) or not whole or limit < 1:
                raise SkyRLTaskError(f"{gem_env_id}: the row's max_turns must be an integer, got {limit!r}: a whole number of at least 1, or left out for no turn limit.")
            make_kwargs["max_turns"] = int(limit)  # one task's limit overrides the config's
        self.env = make(gem_env_id, **make_kwargs)
        limit = make_kwargs.get("max_turns")
        self.max_turns = int(limit) if limit is not None else 1_000_000  # GEM's turn limit, when set, ends it first
        self.episode_return = 0.0
        self.truncated = False

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset the GEM env with the row's seed and options (SkyRL-Gym's first call of an episode).

        Args:
            prompt: the dataset row's chat prompt; its system messages are kept, the rest is the env's.

        Returns:
            ``(messages, info)``: the system messages then the first observation as a user message, and the
            reset's info.
        """
        observation, info = self.env.reset(seed=self.seed, options=self.options)
        system = [dict(m) for m in prompt or () if isinstance(m, Mapping) and m.get("role") == "system"]
        return [*system, {"role": "user", "content": observation}], dict(info)

    def step(self, action: str) -> dict[str, Any]:
        """Step the GEM env with the model's reply (SkyRL-Gym's step).

        Returns:
            SkyRL-Gym's step dict: ``observations`` (the next user message, none at the end), ``reward``,
            ``done`` and ``metadata``. An exception of the env ends the episode with reward 0 and the error in
            ``metadata`` instead of propagating.
        """
        self.turns += 1
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
            reward = float(reward)
        except Exception as error:
            message = f"{self.gem_env_id}: step raised {type(error).__name__}: {error}"
            log_error_once(self.env.unwrapped, message)
            self.truncated = True
            return {"observations": [], "reward": 0.0, "done": True, "metadata": {"error": message, "truncated": True}}
        if not math.isfinite(reward):  # a NaN would poison SkyRL's batch: the episode ends, as on an exception
            message = f"{self.gem_env_id}: step gave reward {reward}, not a finite number"
            log_error_once(self.env.unwrapped, message)
            self.truncated = True
            return {"observations": [], "reward": 0.0, "done": True, "metadata": {**dict(info), "error": message, "truncated": True}}
        self.episode_return += float(reward)
        self.truncated = bool(truncated)
        done = bool(terminated or truncated)
        return {
            "observations": [] if done or not observation else [{"role": "user", "content": observation}],
            "reward": float(reward),
            "done": done,
            "metadata": {**dict(info), "terminated": bool(terminated), "truncated": bool(truncated)},
        }

    def get_metrics(self) -> dict[str, Any]:
        """The episode's turns, return and whether it was truncated (SkyRL-Gym's per-episode metrics)."""
        return {"turns": self.turns, "return": self.episode_return, "truncated": self.truncated}

    def close(self) -> None:
        """Close the GEM env."""
        self.env.close()


def register_gem_envs(ids: str | Iterable[str] | None = None) -> list[str]:
    """Register GEM envs in SkyRL-Gym's registry under their GEM ids (``env_class`` in a SkyRL dataset row).

    Args:
        ids: GEM ids (one, several, or None for every id :func:`gem_core.list_envs` shows). An id SkyRL-Gym
            already holds is left as it is, so calling this twice is harmless.

    Returns:
        The ids now registered there by GEM.

    Raises:
        UnknownEnvError: an id GEM does not know.
    """
    from gem_core.registry import list_envs, spec

    wanted = list_envs() if ids is None else [ids] if isinstance(ids, str) else list(ids)
    registered = []
    for gem_id in wanted:
        spec(gem_id)  # an unknown id fails here, naming the closest ones
        if gem_id not in skyrl_gym.registry:
            skyrl_gym.register(id=gem_id, entry_point=functools.partial(GemSkyRLEnv, gem_env_id=gem_id))
        registered.append(gem_id)
    return registered
