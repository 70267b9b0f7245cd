"""OpenEnv interop both ways, through the ``openenv`` package's own classes (``pip install -e ".[openenv]"``).

- :func:`openenv_app` serves a GEM env with OpenEnv's own server (``create_fastapi_app`` over
  :class:`GemEnvironment`), so OpenEnv's clients (``GenericEnvClient``, typed ``EnvClient`` subclasses)
  drive it: actions are ``{"text": ...}``, observations carry ``text``, ``reward``, ``done``,
  ``truncated`` and ``info``.
- :class:`OpenEnvEnv` is a :class:`gem_core.Env` over an OpenEnv env: an ``Environment`` in this process
  (an instance, or a class or function that builds one) or a remote one through OpenEnv's clients
  (``GenericEnvClient(url).sync()``, a typed ``EnvClient`` subclass, sync or async). Text actions are
  put in one field of the env's ``Action`` model (a validation error is a malformed action, not an
  exception), and the observation's text is one field (or the observation as JSON). ``reset`` gets
  GEM's ``seed`` and ``options`` only where its signature takes them, as OpenEnv's own server does
  (its template env has ``def reset(self)``). Register it under an id and every adapter, ``run_episode``
  and ``gem eval`` use it.

What does not map: OpenEnv has no ``truncated`` (GEM's is sent as an observation field and folded into
``done``), no ``info`` (sent as an observation field; an OpenEnv observation's ``metadata`` becomes
GEM's ``info``; OpenEnv's server does not send ``metadata``, so a remote env's ``info`` is empty), and no
``sample_random_action`` (pass ``sample_action=`` to :class:`OpenEnvEnv`).

A remote env whose server cannot be reached, or answers with no usable observation (not an object, without
``observation_field``, a ``done`` that is not a bool), behaves like :class:`gem_core.serve.remote.RemoteEnv`:
a step ends the episode as a truncation with ``info["error"]`` naming the server, and a reset raises one
:class:`~gem_core.serve.remote.RemoteEnvError` naming it (after reconnecting once, so a restarted server
plays again).
"""

from __future__ import annotations

import inspect
import json
import math
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from openenv.core.client_types import StepResult as OpenEnvStepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from pydantic import Field, ValidationError

from gem_core.env import Env, StepResult
from gem_core.errors import InvalidArgument, InvalidArgumentType, UnknownKey
from gem_core.serve.asgi import json_bytes
from gem_core.serve.remote import RemoteEnvError

__all__ = ["TextAction", "TextObservation", "GemEnvironment", "openenv_app", "OpenEnvEnv"]


class TextAction(Action):
    """A GEM action: the model's text."""

    text: str = Field(description="the model's action text")


class TextObservation(Observation):
    """A GEM step as an OpenEnv observation (``done`` is ``terminated or truncated``)."""

    text: str = Field(default="", description="what the agent reads next")
    truncated: bool = Field(default=False, description="the episode was cut short (turn limit, error)")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info dict, as JSON")


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json_bytes(info))


class GemEnvironment(Environment[TextAction, TextObservation, State]):
    """One GEM env as an OpenEnv ``Environment`` (one instance per OpenEnv session).

    Args:
        make_env: builds the GEM env this session steps.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, make_env: Callable[[], Env]):
        super().__init__()
        self.env = make_env()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TextObservation:
        """Reset the GEM env (OpenEnv's reset). GEM's reset ``options`` are the other ``kwargs``: OpenEnv's clients
        (and :class:`OpenEnvEnv`) send custom reset fields top-level; an ``options`` dict is read too, and wins.

        Returns:
            The first observation as OpenEnv's text observation (its ``info`` made JSON-safe).
        """
        nested = kwargs.pop("options", None)
        options = {**kwargs, **(nested if isinstance(nested, dict) else {})} or nested
        observation, info = self.env.reset(seed=seed, options=options)
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        return TextObservation(text=observation, info=_jsonable(info), done=False, reward=None)

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        """Step the GEM env with the action's text (OpenEnv's step); ``timeout_s`` is not used.

        Returns:
            The next observation with the reward, ``done`` (terminated or truncated) and ``truncated``.
        """
        observation, reward, terminated, truncated, info = self.env.step(action.text)
        self._state.step_count += 1
        return TextObservation(
            text=observation, reward=float(reward), done=bool(terminated or truncated), truncated=bool(truncated), info=_jsonable(info)
        )

    @property
    def state(self) -> State:
        """The session's OpenEnv state: the episode id and the steps taken in it."""
        return self._state

    def close(self) -> None:
        """Close the GEM env."""
        self.env.close()


def openenv_app(env_id: str, *, max_concurrent_envs: int = 64, **make_kwargs: Any) -> Any:
    """OpenEnv's FastAPI app serving the GEM env ``env_id`` (run it with uvicorn)."""
    from gem_core.registry import make, spec

    spec(env_id)  # an unknown id fails here, naming the closest ids
    return create_fastapi_app(
        lambda: GemEnvironment(lambda: make(env_id, **make_kwargs)), TextAction, TextObservation, max_concurrent_envs=max_concurrent_envs
    )


def _truncated(observation: Any) -> bool:
    """The observation's ``truncated`` field where it is a bool (GemEnvironment's TextObservation), else False:
    an OpenEnv env's own field of that name that is not a bool is not read as GEM's truncation."""
    value = observation.get("truncated") if isinstance(observation, dict) else getattr(observation, "truncated", None)
    return isinstance(value, (bool, np.bool_)) and bool(value)


def _accepted(method: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``kwargs`` that ``method``'s signature takes (all of them if it takes ``**kwargs``): OpenEnv's
    server calls ``reset`` and ``step`` this way, so an env written for it may take none."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin without a signature: pass everything
        return dict(kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(kwargs)
    return {name: value for name, value in kwargs.items() if name in parameters}


def _is_env(candidate: Any) -> bool:
    """A built env or client (has ``reset`` and ``step``), as opposed to a class or function that builds one."""
    return not isinstance(candidate, type) and callable(getattr(candidate, "reset", None)) and callable(getattr(candidate, "step", None))


def _open(environment: Any) -> Any:
    """The env to call: ``environment`` itself, or what it builds; an async OpenEnv client gets its sync wrapper."""
    if isinstance(environment, EnvClient):
        return environment.sync()
    if _is_env(environment):
        return environment
    if not callable(environment):
        raise InvalidArgumentType(
            f"OpenEnvEnv(environment={type(environment).__name__}): expected an OpenEnv Environment, an OpenEnv client "
            "(GenericEnvClient(base_url=...).sync()) or a callable that builds one."
        )
    built = environment()
    if isinstance(built, EnvClient):
        return built.sync()
    if not _is_env(built):
        raise InvalidArgumentType(f"OpenEnvEnv: {environment!r} built a {type(built).__name__}, which has no reset() and step().")
    return built


def _client_url(environment: Any) -> str | None:
    """The server address of an OpenEnv client (its WebSocket URL), None for an in-process env."""
    client = getattr(environment, "async_client", environment)
    if not isinstance(client, EnvClient):
        return None
    return str(getattr(client, "_ws_url", None) or "") or type(client).__name__


def _unreachable(error: BaseException) -> bool:
    """The client lost (or never got) its connection, or got no answer in time: the server's state is unknown."""
    import asyncio

    kinds: tuple[type, ...] = (OSError, asyncio.TimeoutError, TimeoutError, EOFError)
    try:
        from websockets.exceptions import WebSocketException

        kinds += (WebSocketException,)
    except ImportError:
        pass
    return isinstance(error, kinds)


def _detail(error: BaseException) -> str:
    """``error``'s type and message, cut short (the message may quote a whole answer)."""
    return f"{type(error).__name__}: {str(error)[:300]}" if str(error) else type(error).__name__


class OpenEnvEnv(Env):
    """An OpenEnv env as a GEM env, in this process or behind OpenEnv's server.

    Args:
        environment: an OpenEnv ``Environment``; a class or function that builds one; or an OpenEnv client
            of a running server (``GenericEnvClient(base_url=url).sync()``, the env's typed ``EnvClient``,
            an async client, or a function that builds one). :meth:`close` closes it.
        action_cls: its ``Action`` model (actions are validated here, before they are sent).
        action_field: the field of ``action_cls`` that receives the action text.
        observation_field: the observation field shown as text; None shows the observation (without
            ``done``, ``reward`` and ``metadata``) as JSON, or its only string field.
        sample_action: ``f(np_random) -> str``, a well-formed random action (OpenEnv has none).

    ``reset(seed=, options=)`` passes ``seed`` (when not None) and the ``options`` entries only where the
    env's ``reset`` takes them, like OpenEnv's server; an env that takes no seed is not seeded by GEM.

    Raises:
        InvalidArgument: if ``action_field`` is not a field of the env's action class.
    """

    def __init__(
        self,
        environment: Environment | EnvClient | Any | Callable[[], Any],
        action_cls: type[Action],
        *,
        action_field: str = "text",
        observation_field: str | None = None,
        sample_action: Callable[[np.random.Generator], str] | None = None,
    ):
        if action_field not in action_cls.model_fields:
            raise InvalidArgument(f"OpenEnvEnv(action_field={action_field!r}): {action_cls.__name__} has fields {list(action_cls.model_fields)}; name the one that takes the text.")
        self.environment = _open(environment)
        self.action_cls, self.action_field = action_cls, action_field
        self.observation_field = observation_field
        self._sample_action = sample_action
        self._url = _client_url(self.environment)
        #: a remote step failed: the server-side episode is gone until the next reset reconnects
        self._broken = False

    def _describe(self, error: BaseException) -> str:
        return f"the OpenEnv server at {self._url} is unreachable ({_detail(error)})"

    def _disconnect(self) -> None:
        """Drop a broken connection so the next call opens a new one (best effort: the server may be gone)."""
        disconnect = getattr(self.environment, "disconnect", None)
        if callable(disconnect):
            try:
                disconnect()
            except Exception:
                pass

    def _text(self, observation: Any) -> str:
        fields = observation.model_dump() if isinstance(observation, Observation) else observation
        if not isinstance(fields, dict):
            raise InvalidArgumentType(f"OpenEnvEnv: the env answered a {type(observation).__name__}, not an Observation or a dict of its fields.")
        if self.observation_field is not None:
            if self.observation_field not in fields:
                raise UnknownKey(f"OpenEnvEnv(observation_field={self.observation_field!r}): the observation has fields {sorted(fields)[:20]}.")
            return str(fields[self.observation_field])
        fields = {k: v for k, v in fields.items() if k not in ("done", "reward", "metadata")}
        strings = [v for v in fields.values() if isinstance(v, str)]
        return strings[0] if len(fields) == 1 and strings else json.dumps(fields, default=str)

    @staticmethod
    def _unpack(result: Any) -> tuple[Any, float, bool, dict[str, Any]]:
        """(observation, reward, done, metadata) of an ``Environment``'s Observation or a client's StepResult.
        ``done`` is OpenEnv's one flag; a bool ``truncated`` field (:class:`GemEnvironment` sends one) is read by
        :func:`_truncated`.

        Raises:
            InvalidArgumentType: ``done`` is not a bool (a client passes on whatever the server sent: ``"no"``
                would read as true).
        """
        observation = result.observation if isinstance(result, OpenEnvStepResult) else result
        reward, done = getattr(result, "reward", None), getattr(result, "done", False)
        if not isinstance(done, (bool, np.bool_)):
            raise InvalidArgumentType(f"OpenEnvEnv: the env answered done={done!r:.50}, a {type(done).__name__}, not a bool.")
        metadata = getattr(observation, "metadata", None) if isinstance(observation, Observation) else None
        return observation, 0.0 if reward is None else float(reward), bool(done), dict(metadata or {})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; a remote env's step that fails is a truncation, but a reset has nothing to fall back on.

        Raises:
            RemoteEnvError: a remote env's server cannot be reached (after one reconnect), fails the reset, or
                answers it with what the client cannot read.
        """
        super().reset(seed=seed)
        kwargs = {**(options or {}), **({} if seed is None else {"seed": seed})}
        if self._url is None:
            observation, _, _, metadata = self._unpack(self.environment.reset(**_accepted(self.environment.reset, kwargs)))
            return self._text(observation), metadata
        return self._remote_reset(kwargs)

    def _remote_reset(self, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A reset through the client, as (text, metadata); a lost connection is reopened once (the server may have
        restarted), then raised as one error naming the server (a reset has no result to fall back on), as is an
        answer the client cannot read (not JSON, not an observation, no ``observation_field``, a ``done`` that is
        not a bool), as RemoteEnv raises for a bad reset answer."""
        for attempt in range(2):
            if self._broken or attempt:
                self._disconnect()
            try:
                observation, _, _, metadata = self._unpack(self.environment.reset(**_accepted(self.environment.reset, kwargs)))
                result = self._text(observation), metadata
            except Exception as error:
                self._broken = True
                if not _unreachable(error):
                    raise RemoteEnvError(f"the OpenEnv server at {self._url} failed the reset or answered it malformed ({_detail(error)})") from None
                if attempt:
                    raise RemoteEnvError(f"{self._describe(error)}: check that it is running and that the URL is right") from None
                continue
            self._broken = False
            return result
        raise AssertionError("unreachable")

    def step(self, action: str) -> StepResult:
        try:
            typed = self.action_cls(**{self.action_field: action})
        except ValidationError as error:
            return self.invalid_action(f"The action was not accepted: {error.errors()[0].get('msg', error)}.")
        if self._broken:
            return "", 0.0, False, True, {"error": "no OpenEnv session: call reset() first (or the last one ended in an error)"}
        try:
            observation, reward, done, metadata = self._unpack(self.environment.step(typed))
            text = self._text(observation)
        except Exception as error:
            if self._url is None:
                raise
            # The server-side episode is gone or in an unknown state. An answer the client cannot read (not JSON, a
            # reward "lots", no observation_field, a done "no") ends the episode too, as in RemoteEnv: a step never
            # raises for what a server sent.
            self._broken = True
            self._disconnect()
            if not _unreachable(error):
                return "", 0.0, False, True, {"error": f"the OpenEnv server at {self._url} failed the step or answered it malformed ({_detail(error)}); the next reset() reconnects"}
            return "", 0.0, False, True, {"error": f"{self._describe(error)}: check that it is running; the next reset() reconnects"}
        if not math.isfinite(reward):  # a NaN would poison the batch's advantages: this episode ends instead
            return "", 0.0, False, True, {"error": f"the OpenEnv env's step gave reward {reward}, not a finite number"}
        # OpenEnv has one ``done``; a GEM env served by GemEnvironment also says whether it was a truncation
        # (a turn limit: the value is bootstrapped, not taken as zero).
        truncated = done and _truncated(observation)
        return text, reward, done and not truncated, truncated, metadata

    def sample_random_action(self) -> str:
        if self._sample_action is None:
            raise NotImplementedError("OpenEnv environments have no random action; pass OpenEnvEnv(sample_action=...)")
        return self._sample_action(self.np_random)

    def close(self) -> None:
        """Close the OpenEnv environment or client (a server that is already gone is not an error), then this env."""
        try:
            self.environment.close()
        except Exception as error:
            if self._url is None or not _unreachable(error):
                raise  # closing a client whose server is gone has nothing left to close
        super().close()
