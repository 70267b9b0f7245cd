"""The text environment contract every GEM env follows.

An :class:`Env` is a :class:`gymnasium.Env` whose observations and actions are strings. Everything the
rest of the project does (wrappers, vector execution, the episode runner, the adapters) relies only on
the methods defined here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces

__all__ = ["Env", "TextSpace", "StepResult", "MAX_TEXT_LENGTH", "EnvThreadPool", "ENV_THREADS", "run_in_env_thread"]

#: Longest observation or action the spaces admit. Actions longer than this are still answered (with a
#: format penalty), never rejected with an exception: a model's output is untrusted input.
MAX_TEXT_LENGTH = 1_000_000

StepResult = tuple[str, SupportsFloat, bool, bool, dict[str, Any]]

class EnvThreadPool:
    """The threads that run blocking ``step``/``reset`` calls for :meth:`Env.astep`/:meth:`Env.areset`.

    Large (256 threads) on purpose: asyncio's default executor has ``min(32, cpus + 4)`` threads, so on
    a 2-core machine only 6 slow steps (tool calls, graders waiting on I/O) could overlap, while
    episodes run by the hundred and a waiting thread is cheap (``bench/concurrency.py`` shows both).
    The threads start on first use, not at import; :meth:`shutdown` stops them, and a later call
    starts a fresh pool.
    """

    def __init__(self, max_workers: int = 256, thread_name_prefix: str = "gem-env"):
        self.max_workers = max_workers
        self.thread_name_prefix = thread_name_prefix
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The executor, created on first use."""
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = concurrent.futures.ThreadPoolExecutor(self.max_workers, self.thread_name_prefix)
                executor = self._executor
        return executor

    @property
    def started(self) -> bool:
        return self._executor is not None

    async def run(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking call in a pool thread without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the threads (after their calls finish when ``wait``)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=cancel_futures)


#: The process-wide pool behind the default :meth:`Env.astep`/:meth:`Env.areset`.
ENV_THREADS = EnvThreadPool()


async def run_in_env_thread(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run a blocking env call in :data:`ENV_THREADS` without blocking the event loop."""
    return await ENV_THREADS.run(fn, *args, **kwargs)


class TextSpace(spaces.Text):
    """A :class:`gymnasium.spaces.Text` that admits any Unicode string up to ``max_length``.

    gymnasium's ``Text`` checks membership against a finite charset (alphanumerics by default). LLM
    observations hold punctuation, newlines and arbitrary Unicode, so membership here is "is a ``str``
    of admissible length"; ``sample()`` still draws from the charset, which gives random actions.
    """

    def __init__(self, max_length: int = MAX_TEXT_LENGTH, *, min_length: int = 0, seed: int | None = None):
        charset = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?()[]{}\\'\"-_+=*/<>\n"
        super().__init__(max_length=max_length, min_length=min_length, charset=charset, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(min_length={self.min_length}, max_length={self.max_length})"


class Env(gym.Env[str, str]):
    """A multi-turn text environment.

    Subclasses implement :meth:`reset` (calling ``super().reset(seed=seed)`` first, which seeds
    :attr:`np_random`), :meth:`step` and :meth:`sample_random_action`. All randomness goes through
    ``self.np_random``: the process-wide ``random``/``numpy`` generators are never seeded or used, so the
    same seed gives the same episode whatever else runs in the process.

    A malformed action is part of the game, not a programming error: answer it with
    :meth:`invalid_action`, which returns an observation that says what was expected, the env's
    :attr:`format_penalty` as reward, and ``info["format_error"] = True``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"]}
    observation_space = TextSpace()
    action_space = TextSpace()

    #: The most an episode can return, where the env knows it (games: 1.0 on a win); None if unbounded
    #: or unknown. Evaluation and tests compare returns against it.
    max_return: float | None = None
    #: Reward given for an action the env cannot parse. Negative, small next to a win.
    format_penalty: float = -0.1
    #: Whether a malformed action ends the episode. Games usually let the agent try again (and count the
    #: turn); single-question tasks end.
    terminate_on_format_error: bool = False
    #: Whether a step or reset may wait (on I/O, a subprocess, a grader). Envs whose steps are quick
    #: pure computation (the games) set it False: ``astep``/``areset`` and the vector backends then call
    #: them inline instead of hopping to a thread, which costs far more than such a step.
    blocking: bool = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode.

        Args:
            seed: seeds :attr:`np_random`; the same seed gives the same episode.
            options: env-specific reset options.

        Returns:
            ``(observation, info)``: the first observation states the task and the action format.
        """
        super().reset(seed=seed, options=options)
        return "", {}

    def step(self, action: str) -> StepResult:
        """Act in the env.

        Returns:
            ``(observation, reward, terminated, truncated, info)`` as in gymnasium. ``observation`` is the
            text the agent sees next (feedback on this action, and what to do now).
        """
        raise NotImplementedError

    def sample_random_action(self) -> str:
        """A well-formed action drawn from :attr:`np_random` (a random policy's move)."""
        raise NotImplementedError

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """:meth:`reset` off the event loop, so a slow reset never blocks an async trainer."""
        if not self.blocking:
            return self.reset(seed=seed, options=options)
        return await run_in_env_thread(self.reset, seed=seed, options=options)

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` off the event loop: tool calls and graders may take seconds."""
        if not self.blocking:
            return self.step(action)
        return await run_in_env_thread(self.step, action)

    def invalid_action(self, message: str, *, truncated: bool = False, **info: Any) -> StepResult:
        """The step result for an action the env cannot use; ``message`` says what was expected.

        ``truncated`` is for envs where a malformed move still costs a turn: the last one ends the episode.
        """
        return (
            message,
            self.format_penalty,
            self.terminate_on_format_error,
            truncated,
            {"format_error": True, **info},
        )

    def render(self) -> str | None:
        """The current state as text (``render_mode="ansi"``); envs that keep a board override this."""
        return None
