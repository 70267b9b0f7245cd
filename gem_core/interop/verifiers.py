"""verifiers (0.4.0, ``verifiers.v1``) tasksets as GEM envs (``pip install -e ".[verifiers]"``). A partial bridge.

``make("verifiers:<taskset>")`` is :class:`VerifiersEnv`: the taskset is loaded by verifiers' own loader
(an installed package, or a module on ``sys.path``, exporting its ``Taskset`` subclass in ``__all__``, as
``vf-eval <taskset>`` loads it). Each episode is one task: the first observation is its prompt (system
prompt first), the action is the model's reply, and the reward is what the task's own ``@vf.reward``
functions (and plugged reward functions) give, computed by verifiers' ``Task.score`` over a trace holding
that conversation. The episode ends there (``terminated``): verifiers scores a finished rollout, so the
whole reward arrives at the last (here: the only) turn.

The other way, :func:`load_environment` exports a GEM env as a verifiers taskset (:class:`GemTaskset`):
one task per seed, its prompt GEM's first observation, its ``gem`` reward GEM's own rewards for the
trace's replies (a fresh env reset with the task's seed, stepped with each assistant reply in order).
verifiers' loader imports a taskset by a top-level module name, so for its CLI a two-line module
(``gem_tasks.py``: ``from gem_core.interop.verifiers import GemHarness, GemTaskset`` and ``__all__ =
["GemTaskset", "GemHarness"]``) makes it a plugin: ``--env.taskset.id gem_tasks --env.taskset.env_id
math:GSM8K``; :class:`GemHarness`, exported beside it, is then its default harness, which plays
multi-turn GEM envs (GEM's observations as the user turns).

Multi-turn play and tools: in verifiers 0.4.0 a *harness* runs them (a chat loop or an agent, calling the
model through verifiers' interception server), not the task. ``make("verifiers:<module>", harness=ID)``
runs verifiers' own rollout with that harness, its model calls answered by GEM's actions
(:mod:`gem_core.interop.verifiers_relay`): each request's new messages are an observation, each action
the reply (tool calls written in ``call_format``), and the rollout's reward arrives at the last turn.
Without ``harness``, tasks that declare toolsets, need a container, or score with a runtime are refused
with a :class:`VerifiersUnsupported` error that says so.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from typing import Any

from gem_core.env import Env, StepResult, log_error_once
from gem_core.errors import DependencyNotInstalled, GemError, InvalidArgumentType

try:
    import verifiers.v1 as vf
    from verifiers.v1.configs.harness import HarnessConfig
    from verifiers.v1.configs.taskset import TasksetConfig
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.harness import Harness
    from verifiers.v1.runtimes import ProgramResult
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask
    from verifiers.v1.types import AssistantMessage, SystemMessage, UserMessage
    from verifiers.v1.utils.generic import concrete_type
    from verifiers.v1.utils.loaders import taskset_class
except ImportError as error:  # pragma: no cover - the extra is missing
    raise DependencyNotInstalled(f'verifiers:* envs need verifiers 0.4.0 ({error}): pip install -e ".[verifiers]"') from error

__all__ = ["VerifiersEnv", "VerifiersUnsupported", "VerifiersUnavailable", "UnknownVerifiersModule", "GemTaskset", "GemTasksetConfig", "GemHarness", "load_environment", "PREFIX"]

PREFIX = "verifiers:"
"""The id prefix that makes a verifiers environment: ``make("verifiers:<module>")``."""


class UnknownVerifiersModule(GemError, KeyError):
    """``verifiers:<module>`` names no importable verifiers taskset."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class VerifiersUnavailable(GemError, RuntimeError):
    """A verifiers taskset needs what this machine lacks (the network, to load its data)."""


class VerifiersUnsupported(GemError, NotImplementedError):
    """A verifiers task needs what this bridge does not run (a harness's tools, a container, a runtime)."""


def _load_taskset(module: str, config: dict[str, Any]) -> Any:
    name = PREFIX + module
    try:
        cls = taskset_class(module)
    except ModuleNotFoundError as error:
        if "." in module:  # verifiers looks a dotted id up under verifiers.v1.tasksets first, and fails there
            raise UnknownVerifiersModule(
                f"{name}: verifiers' loader imports a taskset by a top-level module name, not {module!r}; write a module "
                f"that re-exports its Taskset (from {module} import MyTaskset; __all__ = ['MyTaskset']) and name that."
            ) from None
        raise UnknownVerifiersModule(
            f"{name}: no verifiers taskset module {module!r} ({error}). Install the environment's package "
            "(its Hub package, pip install ...) or put its module on sys.path; the module exports its vf.Taskset subclass in __all__."
        ) from None
    except (TypeError, AttributeError, ValueError) as error:
        raise UnknownVerifiersModule(f"{name}: module {module!r} is not a verifiers taskset ({error}).") from None
    config_cls = concrete_type(cls, TasksetConfig) or TasksetConfig
    return cls(config_cls.model_validate({**config, "id": module}))


def _read_tasks(name: str, taskset: Any, max_tasks: int) -> list[Any]:
    """The taskset's tasks; a ``load()`` that needs the network and cannot reach it is said as such."""
    import socket

    from gem_core.errors import causes

    try:
        return list(itertools.islice(iter(taskset), max_tasks))
    except Exception as error:
        if any(isinstance(e, (ConnectionError, TimeoutError, socket.gaierror)) or type(e).__module__.split(".")[0] in ("httpx", "httpcore", "requests")
               for e in causes(error)):
            raise VerifiersUnavailable(
                f"{name}: its taskset's load() needs the network and could not reach it ({type(error).__name__}: {error}); "
                "run it where that is reachable, or point its taskset_config at a local copy of the data."
            ) from error
        raise


def _task_index(name: str, value: Any, count: int) -> int:
    """``options["index"]`` as a task position (wrapping around ``count``), or an error naming the option."""
    try:
        return int(value) % count
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentType(
            f"{name}: options['index'] must be an integer (the task's position, 0 to {count - 1}), got {value!r}"
        ) from None


def _needs_harness(task: Any, name: str) -> str | None:
    """Why ``task`` cannot be played by this bridge, or None."""
    import inspect

    if getattr(task, "NEEDS_CONTAINER", False):
        return "it needs a container"
    toolsets = getattr(type(task), "toolsets", None)
    if callable(toolsets) and toolsets(task.config):
        return "it declares toolsets (tools run by verifiers' harness)"
    for fn in task.hooks("reward"):
        parameter = inspect.signature(fn).parameters.get("runtime")
        if parameter is not None and parameter.default is inspect.Parameter.empty:
            return f"its reward {fn.__name__} reads the runtime"
    return None


class VerifiersEnv(Env):
    """A verifiers taskset as a GEM env, one task per episode (see the module docstring).

    Args:
        module: the taskset's module or package name (``make`` passes what follows ``verifiers:``).
        taskset_config: fields of the taskset's config (its ``TasksetConfig`` subclass), e.g. a split.
        max_tasks: tasks read from the taskset (an infinite taskset is cut here).
        harness: play each task through verifiers' own rollout with this harness (its id), GEM's actions
            answering its model calls; None scores one reply per task offline.
        call_format: how actions write tool calls in harness mode (:data:`gem_core.tools.calls.CALL_FORMATS`).
        relay_timeout: seconds to wait for the harness's next model call or the rollout's end.

    Raises:
        UnknownVerifiersModule: no such module, or it exports no taskset.
        InvalidArgument: ``max_tasks`` is not a whole number of at least 1; in harness mode, ``call_format`` is
            not a known format or a parser, or ``relay_timeout`` not a finite number of seconds above 0.
    """

    max_step_seconds = 30.0  # a reward function may parse, verify math or call a judge

    def __init__(
        self,
        module: str,
        *,
        taskset_config: dict[str, Any] | None = None,
        max_tasks: int = 100_000,
        harness: str | None = None,
        call_format: str = "hermes",
        relay_timeout: float = 120.0,
    ):
        from gem_core.vector.calls import check_count

        # Checked first: islice raised a raw ValueError for -1 or "5", and 0 read as an empty taskset.
        max_tasks = check_count("max_tasks", max_tasks)
        self.module, self.name = module, PREFIX + module
        self.taskset = _load_taskset(module, dict(taskset_config or {}))
        self.relay = None
        self._ended: Any = None
        self.tasks = _read_tasks(self.name, self.taskset, max_tasks)
        if not self.tasks:
            raise UnknownVerifiersModule(f"{self.name}: the taskset yields no tasks; check taskset_config.")
        self.task: Any = None
        self.messages: list[Any] = []
        if harness is not None:  # last: a server and thread of its own, which a later failure here would leak
            from gem_core.interop.verifiers_relay import HarnessRelay

            self.relay = HarnessRelay(module, dict(taskset_config or {}), harness, call_format=call_format, timeout=relay_timeout)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        index = _task_index(self.name, options["index"], len(self.tasks)) if "index" in options else int(self.np_random.integers(len(self.tasks)))
        task = self.tasks[index]
        if self.relay is not None:
            self.task = self._ended = None  # until the rollout has begun: a step after a failed begin asks for a reset
            observation, ended = self.relay.begin(task)
            self.task, self._ended = task, ended
            return observation, {"task_index": index, "task_key": task.key}
        reason = _needs_harness(task, self.name)
        if reason is not None:
            raise VerifiersUnsupported(
                f"{self.name}: task {index} cannot be scored from one reply: {reason}. Play it through a verifiers harness, "
                f"which runs its tools and turns: make({self.name!r}, harness='HARNESS_ID') (a built-in harness or a module exporting one)."
            )
        self.task = task
        data = task.data
        prompt = data.prompt if not isinstance(data.prompt, str) and data.prompt is not None else [UserMessage(content=data.prompt or "")]
        self.messages = ([SystemMessage(content=data.system_prompt)] if data.system_prompt else []) + list(prompt)
        text = "\n\n".join(t for t in ((data.system_prompt or ""), data.prompt_text) if t)
        return text, {"task_index": index, "task_key": task.key}

    def _trace(self, task: Any, action: str) -> Trace:
        """The trace verifiers' scoring reads: the prompt's messages, then ``action`` as the sampled reply."""
        trace = Trace(
            task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            state=state_cls(type(task))(),
            agent=AgentInfo(config=vf.AgentConfig(), name="gem", trainable=True),
        )
        for message in self.messages:
            trace.nodes.append(MessageNode(parent=len(trace.nodes) - 1 if trace.nodes else None, message=message))
        trace.nodes.append(MessageNode(parent=len(trace.nodes) - 1 if trace.nodes else None, message=AssistantMessage(content=action), sampled=True))
        trace.is_completed = trace.ok = True
        return trace

    def step(self, action: str) -> StepResult:
        from gem_core.transport.sync_bridge import run_sync

        if self.task is None:
            return "", 0.0, False, True, {"error": f"{self.name}: no episode; call reset() first"}
        if self.relay is not None:
            return self._relayed_step(action)
        task, self.task = self.task, None  # one reply per task: the next step is past the end
        trace = self._trace(task, action)
        message: str | None
        try:  # a reward that hangs (a judge that never answers) would hold the whole batch: bounded here
            run_sync(lambda: asyncio.wait_for(task.score(trace), self.max_step_seconds))
            reward = float(trace.reward)
        except TimeoutError:
            message = f"{self.name}: scoring took longer than max_step_seconds={self.max_step_seconds}s; it was cancelled"
        except Exception as error:  # a reward function's bug ends this episode, not the batch
            message = f"{self.name}: scoring raised {type(error).__name__}: {error}"
        else:
            message = None if math.isfinite(reward) else f"{self.name}: the reward is {reward}, not a finite number"
        if message is not None:  # one episode ends with the error; a NaN would poison the batch's advantages
            log_error_once(self, message)
            return "", 0.0, False, True, {"error": message}
        rewards = {k: (None if r is None else r.value) for k, r in trace.rewards.items()}
        return "", reward, True, False, {"rewards": rewards, "metrics": dict(trace.metrics)}

    def _relayed_step(self, action: str) -> StepResult:
        """The harness's model call answered with ``action``; the reward comes when its rollout ends."""
        from gem_core.interop.verifiers_relay import RelayError

        assert self.relay is not None
        try:
            observation, episode = (("", self._ended) if self._ended is not None else self.relay.answer(action))
        except RelayError as error:
            log_error_once(self, str(error))
            self.task = None
            self.relay.cancel()
            return "", 0.0, False, True, {"error": str(error)}
        if episode is None:
            return observation, 0.0, False, False, {}
        self.task = None
        traces = list(episode.traces)
        errors = [f"{e.type}: {e.message}" for e in (*episode.errors, *(x for t in traces for x in t.errors))]
        trace = traces[-1] if traces else None
        info: dict[str, Any] = {}
        if trace is not None:
            info = {"rewards": {k: (None if r is None else r.value) for k, r in trace.rewards.items()}, "metrics": dict(trace.metrics)}
        if trace is not None and not errors and not math.isfinite(float(trace.reward)):
            errors = [f"the reward is {trace.reward}, not a finite number"]
        if errors or trace is None:
            info["error"] = f"{self.name}: the rollout failed: " + "; ".join(errors or ["it recorded no trace"])
            return "", 0.0, False, True, info
        return "", float(trace.reward), not trace.is_truncated, bool(trace.is_truncated), info

    def close(self) -> None:
        """Stop the relay server, if one runs, then close this env."""
        if self.relay is not None:
            self.relay.close()
        super().close()

    def sample_random_action(self) -> str:
        raise NotImplementedError(f"{self.name}: verifiers tasks have no random action; a policy writes the reply.")


class GemTasksetConfig(TasksetConfig):
    """Which GEM env and seeds :class:`GemTaskset` exports (``--env.taskset.env_id`` and so on)."""

    env_id: str = ""
    """The GEM env id (``math:GSM8K``, ``game:GuessTheNumber-v0``)."""
    num_tasks: int = 100
    """Tasks, one per seed."""
    seed_start: int = 0
    """The first task's seed; task ``i`` plays seed ``seed_start + i``."""
    make_kwargs: dict[str, Any] = {}
    """Keyword arguments for GEM's ``make``."""


class GemTaskData(vf.TaskData):
    """One GEM episode: the env, its seed and make kwargs (the prompt is its first observation)."""

    env_id: str
    seed: int
    make_kwargs: dict[str, Any] = {}


def _replay(env_id: str, seed: int, make_kwargs: dict[str, Any], replies: list[str]) -> tuple[float, int, bool]:
    """GEM's return for ``replies`` played in order from ``reset(seed)``: (return, turns played, episode ended)."""
    from gem_core.registry import make

    env = make(env_id, **make_kwargs)
    try:
        env.reset(seed=seed)
        total, turns, ended = 0.0, 0, False
        for reply in replies:
            _, reward, terminated, truncated, _ = env.step(reply)
            total, turns, ended = total + float(reward), turns + 1, bool(terminated or truncated)
            if ended:
                break
        return total, turns, ended
    finally:
        env.close()


class GemTask(vf.Task[GemTaskData, vf.State, vf.TaskConfig]):
    """A GEM episode as a verifiers task, scored by GEM's own env."""

    async def _played(self, trace: Trace) -> tuple[float, int, bool]:
        import asyncio

        replies = [message.content or "" for message in trace.assistant_messages]
        cached = trace.info.get("gem")
        if cached is None or cached["replies"] != replies:
            d = self.data
            result = await asyncio.to_thread(_replay, d.env_id, d.seed, dict(d.make_kwargs), replies)
            trace.info["gem"] = cached = {"replies": replies, "result": list(result)}
        return tuple(cached["result"])  # type: ignore[return-value]

    @vf.reward
    async def gem(self, trace: Trace) -> float:
        return (await self._played(trace))[0]

    @vf.metric
    async def gem_turns(self, trace: Trace) -> float:
        return float((await self._played(trace))[1])


class GemTaskset(vf.Taskset[GemTask, GemTasksetConfig]):
    """A GEM env as a verifiers taskset (see :func:`load_environment`)."""

    def load(self) -> Any:
        """The taskset's tasks: one per seed from ``seed_start``, each holding the env's first observation as its prompt.

        Raises:
            UnknownEnvError: if ``env_id`` is not registered (the message names the closest ids).
        """
        from gem_core.registry import make, spec

        config = self.config
        spec(config.env_id)  # an unknown id fails here, naming the closest ones
        for i in range(config.num_tasks):
            seed = config.seed_start + i
            env = make(config.env_id, **dict(config.make_kwargs))
            try:
                observation, _ = env.reset(seed=seed)
            finally:
                env.close()
            data = GemTaskData(prompt=observation, env_id=config.env_id, seed=seed, make_kwargs=dict(config.make_kwargs))
            yield GemTask(data, config.task)


class GemHarness(Harness[HarnessConfig]):
    """The chat loop that plays an exported GEM env in verifiers: each model reply is GEM's action, each GEM
    observation the next user message, until the episode ends (then :class:`GemTask`'s ``gem`` reward
    replays the same replies from the same seed). A taskset module that exports it beside
    :class:`GemTaskset` makes it that taskset's default harness."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str, mcp_urls: Any, data: Any,
                     tool_interception_url: str | None = None) -> ProgramResult:
        """Play one GEM episode through the model ``endpoint`` (verifiers' harness hook) and return its result.

        Each model reply is stepped into the env of the task's seed until the episode ends; the conversation
        and the env's rewards are what the program result carries.
        """
        import asyncio

        import httpx

        from gem_core.registry import make

        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        env = make(data.env_id, **dict(data.make_kwargs))
        try:
            observation, _ = await asyncio.to_thread(env.reset, seed=data.seed)
            messages.append({"role": "user", "content": observation})
            async with httpx.AsyncClient(timeout=None) as client:
                while True:
                    response = await client.post(f"{endpoint}/chat/completions", headers={"Authorization": f"Bearer {secret}"},
                                                 json={"model": ctx.model, "messages": messages})
                    if response.status_code != 200:
                        return ProgramResult(exit_code=1, stdout="", stderr=response.text[:2000])
                    reply = response.json()["choices"][0]["message"].get("content") or ""
                    messages.append({"role": "assistant", "content": reply})
                    observation, _, terminated, truncated, _ = await asyncio.to_thread(env.step, reply)
                    if terminated or truncated:
                        return ProgramResult(exit_code=0, stdout="", stderr="")
                    messages.append({"role": "user", "content": observation})
        finally:
            env.close()


def load_environment(env_id: str, *, num_tasks: int = 100, seed_start: int = 0, **make_kwargs: Any) -> GemTaskset:
    """The GEM env ``env_id`` as a verifiers taskset: ``num_tasks`` tasks, seeds ``seed_start`` onwards.

    Raises:
        UnknownEnvError: GEM has no env ``env_id`` (when the taskset is iterated).
        InvalidArgument: ``num_tasks`` is not a whole number of at least 1 (``range(-3)`` was a silently empty
            taskset), or ``seed_start`` not a whole number of at least 0.
    """
    from gem_core.vector.calls import check_count

    num_tasks = check_count("load_environment: num_tasks", num_tasks)
    seed_start = check_count("load_environment: seed_start", seed_start, least=0)
    config = GemTasksetConfig(id=__name__, env_id=env_id, num_tasks=num_tasks, seed_start=seed_start, make_kwargs=make_kwargs)
    return GemTaskset(config)
