"""The vector env itself: which call each sub-env gets, and how the answers become one batch.

Autoreset, seeding, errors and subsets are decided here, identically for every backend; a backend only
runs calls (see :mod:`gem_core.vector.calls`). The semantics are described in :mod:`gem_core.vector`.
"""

from __future__ import annotations

import asyncio
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from gem_core.env import MAX_SEED, check_seed
from gem_core.errors import InvalidArgument, InvalidArgumentType, ResetNeeded, UnknownKey, UsageError
from gem_core.vector.backends import BACKENDS, Backend, check_backend_options
from gem_core.vector.calls import Call, EnvBuilder, EnvCall, Failure, Reset, Step, check_step_timeout

__all__ = ["VectorEnv", "Actions"]

Actions = Sequence[Any] | Mapping[int, Any]
"""Actions for :meth:`VectorEnv.step`: one per env (a list/tuple of length ``num_envs``), or a dict
``{env_index: action}`` to step only some envs.
"""


def _parse_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    if isinstance(mode, AutoresetMode):
        return mode
    for member in AutoresetMode:
        if mode in (member.value, member.name) or str(mode).upper().replace("-", "_") == member.name:
            return member
    raise InvalidArgument(
        f"Unknown autoreset_mode {mode!r}; use gymnasium.vector.AutoresetMode.NEXT_STEP, SAME_STEP or DISABLED "
        f"(or their values {[m.value for m in AutoresetMode]})."
    )


class VectorEnv(gym.vector.VectorEnv):
    """A batch of text envs run by one backend (``sync``, ``thread``, ``process``, ``async`` or ``ray``).

    Usually built with :func:`make_vec`. ``step``/``reset`` block; ``astep``/``areset`` are the same
    operations for code already inside an event loop (native for the ``async`` backend, a worker
    thread for the others).

    Stepping a subset: ``step({2: "a", 5: "b"})`` steps envs 2 and 5 only. The envs left out are not
    called at all: their obs entry repeats their previous obs, their reward is 0, ``terminated`` and
    ``truncated`` are False, and their ``_key`` info masks are False. A pending autoreset of an env left
    out waits until the env is next given an action.

    Args:
        env_fns: one function per env that builds it.
        backend: what runs the envs (see above).
        autoreset_mode: gymnasium's :class:`~gymnasium.vector.AutoresetMode` (or its value as a string).
        seed: env ``i`` is reset with ``seed + i`` on the first reset (None: unseeded).
        backend_kwargs: passed to the backend (e.g. ``max_workers`` for ``thread``).
        step_timeout: seconds a call may take before its result is a timeout error (None: no limit).

    Raises:
        InvalidArgument: if there are no envs, the backend or ``autoreset_mode`` is unknown, ``seed`` is not None or a
            whole number from 0 to ``MAX_SEED - num_envs + 1``, or ``step_timeout`` is not positive.
        InvalidArgumentType: if ``backend_kwargs`` is not a mapping, or has an option the backend does not take.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvBuilder],
        backend: str = "sync",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        seed: int | None = 0,
        backend_kwargs: Mapping[str, Any] | None = None,
        step_timeout: float | None = None,
    ):
        if not env_fns:
            raise InvalidArgument("A VectorEnv needs at least one env; pass num_envs >= 1 or a non-empty list of ids.")
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise InvalidArgument(f"Unknown backend {backend!r}; choose one of {sorted(BACKENDS)}.")
        self.autoreset_mode = _parse_autoreset_mode(autoreset_mode)
        self.seed = _checked_base_seed(seed, len(env_fns))
        self.backend_name = backend
        if backend_kwargs is not None and not isinstance(backend_kwargs, Mapping):
            raise InvalidArgumentType(
                f"backend_kwargs={backend_kwargs!r:.80} must be a dict of the backend's options, e.g. "
                "backend_kwargs={'max_workers': 2}, or None."
            )
        kwargs = dict(backend_kwargs or {})
        if step_timeout is not None:
            kwargs["step_timeout"] = check_step_timeout(step_timeout)
        check_backend_options(backend, BACKENDS[backend], kwargs)
        self.backend: Backend = BACKENDS[backend](list(env_fns), **kwargs)
        self.num_envs = len(env_fns)
        try:
            self._set_spaces()
        except BaseException:
            self.backend.close()
            raise

        self._obs: list[Any] = [None] * self.num_envs
        self._needs_reset = np.zeros(self.num_envs, dtype=np.bool_)
        self._next_seeds: list[int | None] = [None if self.seed is None else self.seed + i for i in range(self.num_envs)]
        self._replacements = [0] * self.num_envs
        self._was_reset = False
        # Env index -> why the answer of its last call never reached the caller (a cancelled astep/areset).
        self._lost: dict[int, str] = {}

    def _set_spaces(self) -> None:
        """Spaces, metadata and render mode, read from the envs (which may live in worker processes)."""
        every_env = dict.fromkeys(range(self.num_envs))
        obs_spaces = self._call_each(every_env, "observation_space")
        action_spaces = self._call_each(every_env, "action_space")
        self.single_observation_space = obs_spaces[0]
        self.single_action_space = action_spaces[0]
        if all(s == obs_spaces[0] for s in obs_spaces):
            self.observation_space = gym.vector.utils.batch_space(obs_spaces[0], self.num_envs)
        else:
            self.observation_space = spaces.Tuple(obs_spaces)
        if all(s == action_spaces[0] for s in action_spaces):
            self.action_space = gym.vector.utils.batch_space(action_spaces[0], self.num_envs)
        else:
            self.action_space = spaces.Tuple(action_spaces)
        # A bare callable wrapper may not forward these two; they are informative only.
        metadata, render_mode = self.backend.run({0: Call("metadata")})[0], self.backend.run({0: Call("render_mode")})[0]
        self.metadata = {**(metadata if isinstance(metadata, Mapping) else {}), "autoreset_mode": self.autoreset_mode}
        self.render_mode = None if isinstance(render_mode, Failure) else render_mode

    # ---------------------------------------------------------------------------------------------
    # reset

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Reset every env (or those in ``options["reset_mask"]``, a bool array of shape ``(num_envs,)``).

        Args:
            seed: ``None`` uses the seeds from :func:`make_vec` on the first reset (``seed + i``) and
                continues each env's RNG afterwards; an int ``s`` seeds env ``i`` with ``s + i``; a list
                gives one seed (or None) per env. An explicit seed replaces :func:`make_vec`'s; an env whose
                reset fails keeps its seed for its next reset.
            options: passed to every env's ``reset`` (without ``reset_mask``).

        Returns:
            ``(observations, infos)``: a tuple of ``num_envs`` observations (envs outside the mask keep
            their current obs) and the batched infos of the envs that were reset.

        Raises:
            InvalidArgument: a seed that is not None or a whole number, or whose env's seed (``s + i``) would pass
                :data:`~gem_core.env.MAX_SEED` (checked before any env resets).
            RuntimeError: if an env's reset raises (naming the env and the error).
        """
        calls = self._plan_reset(seed, options)
        return self._record_reset(calls, self._run(calls))

    async def areset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """:meth:`reset` for a running event loop. If it is cancelled, see :meth:`astep`."""
        calls = self._plan_reset(seed, options)
        try:
            return self._record_reset(calls, await self._arun(calls))
        except asyncio.CancelledError:
            self._lose(calls)
            raise

    def _plan_reset(self, seed: int | Sequence[int | None] | None, options: dict[str, Any] | None) -> dict[int, Reset]:
        self._check_open()
        base: int | None = None  # checked before any env resets: env i's reset would refuse seed + i past MAX_SEED
        seeds: list[int | None]
        if isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, (str, bytes)):
            seeds = [_checked_list_seed(i, entry) for i, entry in enumerate(seed)]
            if len(seeds) != self.num_envs:
                raise InvalidArgument(f"seed as a list needs one entry per env ({self.num_envs}), got {len(seeds)}.")
        else:
            base = _checked_base_seed(seed, self.num_envs)
            seeds = [None if base is None else base + i for i in range(self.num_envs)]
        super().reset(seed=base)
        options = dict(options) if options else None
        mask = np.ones(self.num_envs, dtype=np.bool_)
        if options is not None and "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"))
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise InvalidArgument(
                    f"options['reset_mask'] must be a bool numpy array of shape ({self.num_envs},) with at least one "
                    f"True entry, got {mask!r}."
                )
            options = options or None
        if seed is None:  # an explicit seed replaces the pending ones once its reset succeeds (_settle_seed)
            seeds = [self._next_seeds[i] if mask[i] else None for i in range(self.num_envs)]
        return {i: Reset(seed=seeds[i], options=options) for i in range(self.num_envs) if mask[i]}

    def _record_reset(self, calls: Mapping[int, Reset], outcomes: Mapping[int, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        infos: dict[str, Any] = {}
        errors = []
        for i, call in calls.items():
            outcome = _checked(call, outcomes[i])
            self._settle_seed(i, call, outcome)
            if isinstance(outcome, Failure):
                self._needs_reset[i] = True
                errors.append(f"env {i}: {outcome.error}")
                continue
            self._obs[i], info = outcome
            self._needs_reset[i] = False
            infos = self._add_info(infos, info, i)
        if errors:
            raise RuntimeError("Resetting the vector env failed for " + "; ".join(errors))
        self._was_reset = True
        return tuple(self._obs), infos

    # ---------------------------------------------------------------------------------------------
    # step

    def step(self, actions: Actions) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step the envs given actions (all of them for a list, the keys of a dict).

        Returns:
            ``(observations, rewards, terminated, truncated, infos)``: a tuple of ``num_envs``
            observations, float64/bool arrays of shape ``(num_envs,)`` and batched infos; see the module
            docstring for episode ends, errors and envs not given an action.
        """
        batch = _StepBatch(self.num_envs)
        calls = self._plan_step(actions)
        resets = self._record_step(calls, self._run(calls), batch)
        if resets:
            self._record_same_step_resets(resets, self._run(resets), batch)
        return self._finish(batch)

    async def astep(self, actions: Actions) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """:meth:`step` for a running event loop (the ``async`` backend gathers ``env.astep`` calls).

        Cancelled (``asyncio.wait_for`` timing out), it raises ``CancelledError`` at once, but the envs' calls may
        run on (a thread cannot be stopped) and their answers are lost: each of its envs' next step ends the
        episode (``truncated``, ``info["error"]`` starting with ``Interrupted``) instead of going on from a state the
        caller never saw.
        """
        batch = _StepBatch(self.num_envs)
        calls = self._plan_step(actions)
        try:
            resets = self._record_step(calls, await self._arun(calls), batch)
            if resets:
                self._record_same_step_resets(resets, await self._arun(resets), batch)
        except asyncio.CancelledError:
            self._lose(calls)
            raise
        return self._finish(batch)

    def _run(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        send, lost = self._answer_lost(calls)
        return {**lost, **(self.backend.run(send) if send else {})}

    async def _arun(self, calls: Mapping[int, EnvCall]) -> dict[int, Any]:
        send, lost = self._answer_lost(calls)
        return {**lost, **(await self.backend.arun(send) if send else {})}

    def _answer_lost(self, calls: Mapping[int, EnvCall]) -> tuple[dict[int, EnvCall], dict[int, Failure]]:
        """The calls to send, and the answers of the steps of envs whose last answer was lost (see :meth:`astep`):
        those end the episode without calling the env. A reset starts a new episode: nothing is owed."""
        send: dict[int, EnvCall] = {}
        lost: dict[int, Failure] = {}
        for i, call in calls.items():
            why = self._lost.pop(i, None)
            if why is not None and isinstance(call, Step):
                # Replaced as far as anyone knows (the backend may have rebuilt it): its next reset gets a derived seed.
                lost[i] = Failure(why, env_replaced=True)
            else:
                send[i] = call
        return send, lost

    def _lose(self, calls: Mapping[int, EnvCall]) -> None:
        """The answers to ``calls`` never reached the caller (a cancelled astep/areset): end those envs' episodes."""
        for i in calls:
            self._lost[i] = (
                "Interrupted: the astep/areset awaiting this env's call was cancelled (CancelledError); its result was lost "
                "and the episode in progress ended."
            )

    def _select(self, actions: Actions) -> dict[int, Any]:
        if isinstance(actions, Mapping):
            chosen = {}
            for key, action in actions.items():
                if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= key < self.num_envs:
                    raise UnknownKey(f"Action key {key!r} is not an env index in [0, {self.num_envs}).")
                chosen[int(key)] = action
            return chosen
        if isinstance(actions, (str, bytes)) or not isinstance(actions, (Sequence, np.ndarray)):
            raise InvalidArgumentType(
                f"step() takes one action per env (a list/tuple of length {self.num_envs}) or a dict "
                f"{{env_index: action}}, got {type(actions).__name__}."
            )
        if len(actions) != self.num_envs:
            raise InvalidArgument(
                f"step() got {len(actions)} actions for {self.num_envs} envs; pass one per env, or a dict "
                "{env_index: action} to step only some envs."
            )
        return dict(enumerate(actions))

    def _plan_step(self, actions: Actions) -> dict[int, EnvCall]:
        self._check_open()
        if not self._was_reset:
            raise ResetNeeded("Call reset() before step().")
        calls: dict[int, EnvCall] = {}
        for i, action in self._select(actions).items():
            if not self._needs_reset[i]:
                calls[i] = Step(action)
            elif self.autoreset_mode == AutoresetMode.DISABLED:
                raise InvalidArgument(
                    f"Env {i}'s episode has ended and autoreset_mode is DISABLED: reset it first with "
                    f"vec.reset(options={{'reset_mask': mask}}) where mask[{i}] is True, or leave it out of the actions."
                )
            else:  # NEXT_STEP autoreset (or a SAME_STEP reset that failed and is retried)
                calls[i] = Reset(seed=self._next_seeds[i])
        return calls

    def _record_step(self, calls: Mapping[int, EnvCall], outcomes: Mapping[int, Any], batch: _StepBatch) -> dict[int, Reset]:
        """Fold the step outcomes into ``batch``; return the resets SAME_STEP mode must run now."""
        resets: dict[int, Reset] = {}
        for i, call in calls.items():
            outcome = _checked(call, outcomes[i])
            if isinstance(call, Reset):  # a next-step autoreset
                self._settle_seed(i, call, outcome)
                if isinstance(outcome, Failure):
                    batch.truncated[i] = True
                    batch.add_info(self, {"error": outcome.error}, i)
                else:
                    self._obs[i], info = outcome
                    self._needs_reset[i] = False
                    batch.add_info(self, info, i)
                continue
            if isinstance(outcome, Failure):
                self._note_failure(i, outcome)
                obs, reward, terminated, truncated, info = self._obs[i], 0.0, False, True, {"error": outcome.error}
            else:
                obs, reward, terminated, truncated, info = outcome
            self._obs[i] = obs
            batch.rewards[i], batch.terminated[i], batch.truncated[i] = reward, terminated, truncated
            ended = bool(terminated or truncated)
            if ended and self.autoreset_mode == AutoresetMode.SAME_STEP:
                batch.add_info(self, {"final_obs": obs, "final_info": info}, i)
                resets[i] = Reset(seed=self._next_seeds[i])
            else:
                batch.add_info(self, info, i)
                self._needs_reset[i] = ended
        return resets

    def _record_same_step_resets(self, resets: Mapping[int, Reset], outcomes: Mapping[int, Any], batch: _StepBatch) -> None:
        for i, reset in resets.items():
            outcome = _checked(reset, outcomes[i])
            self._settle_seed(i, reset, outcome)
            if isinstance(outcome, Failure):
                # The final obs stays the obs; the next step of this env retries the reset.
                self._needs_reset[i] = True
                batch.add_info(self, {"error": outcome.error}, i)
            else:
                self._obs[i], info = outcome
                self._needs_reset[i] = False
                batch.add_info(self, info, i)

    def _finish(self, batch: _StepBatch) -> tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        return tuple(self._obs), batch.rewards, batch.terminated, batch.truncated, batch.infos

    # ---------------------------------------------------------------------------------------------
    # seeds, failures, attributes

    def _settle_seed(self, index: int, reset: Reset, outcome: Any) -> None:
        """Env ``index``'s pending seed once ``reset`` has an outcome: a reset that succeeded used it up (the
        env's later resets continue its RNG); one that failed leaves its own seed pending, so the retry gets it
        and ``seed + i`` seeds the env's first reset that succeeds."""
        if not isinstance(outcome, Failure):
            self._next_seeds[index] = None
            return
        self._note_failure(index, outcome)
        if reset.seed is not None:  # also over a rebuilt env's derived seed: the retry is seeded either way
            self._next_seeds[index] = reset.seed

    def _note_failure(self, index: int, failure: Failure) -> None:
        if failure.env_replaced:
            # A fresh env has a fresh, unseeded RNG: give its next reset a seed derived from the vector
            # env's seed so runs with a worker crash stay reproducible.
            self._replacements[index] += 1
            if self.seed is not None:
                entropy = [self.seed, index, self._replacements[index]]
                self._next_seeds[index] = int(np.random.SeedSequence(entropy).generate_state(1)[0])

    def _call_each(self, indices: Mapping[int, Any], name: str, *args: Any, **kwargs: Any) -> list[Any]:
        outcomes = self.backend.run({i: Call(name, args, kwargs) for i in indices})
        failed = {i: o.error for i, o in outcomes.items() if isinstance(o, Failure)}
        if failed:
            raise RuntimeError(f"Calling {name!r} on the envs failed: {failed}")
        return [outcomes[i] for i in indices]

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` on every env (or read the attribute if it is not callable).

        ``vec.call("sample_random_action")`` gives one random action per env, from each env's RNG.
        """
        self._check_open()
        return tuple(self._call_each(dict.fromkeys(range(self.num_envs)), name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env."""
        return self.call(name)

    def render(self) -> tuple[Any, ...]:
        """Every env's ``render()`` output."""
        return self.call("render")

    def _check_open(self) -> None:
        if self.closed:
            raise UsageError("This vector env is closed; build a new one with make_vec(...).")

    def close_extras(self, timeout: float | None = None, **kwargs: Any) -> None:
        """Close every env and stop the backend's threads, event loop or worker processes.

        Safe at any time, from any thread: a step in flight gets ``timeout`` seconds to finish (default
        5), then returns with its unfinished envs truncated and ``info["error"]`` starting with "closed".
        """
        self.backend.close(timeout=timeout)

    def __repr__(self) -> str:
        return f"VectorEnv(num_envs={self.num_envs}, backend={self.backend_name!r}, autoreset_mode={self.autoreset_mode.name})"


def _checked_base_seed(seed: Any, num_envs: int) -> int | None:
    """``seed`` as a Python int (or None) such that every env's seed, ``seed + i``, is one :func:`check_seed` takes.

    Raises:
        InvalidArgument: if it is not None or a whole number from 0 to ``MAX_SEED - num_envs + 1``.
    """
    largest = MAX_SEED - num_envs + 1
    if seed is None or (isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and 0 <= int(seed) <= largest):
        return None if seed is None else int(seed)
    raise InvalidArgument(
        f"seed={seed!r:.40}: env i is seeded with seed + i, so with {num_envs} envs seed must be a whole number from 0 to "
        f"{largest} (or None)."
    )


def _checked_list_seed(index: int, seed: Any) -> int | None:
    """Entry ``index`` of a list of seeds, as :func:`check_seed` takes it.

    Raises:
        InvalidArgument: naming the entry, if :func:`check_seed` refuses it.
    """
    try:
        return check_seed(seed)
    except InvalidArgument:
        raise InvalidArgument(f"seed[{index}]={seed!r:.40} must be a whole number from 0 to {MAX_SEED}, or None.") from None


def _checked(call: EnvCall, outcome: Any) -> Any:
    """``outcome`` if the batch can hold it, else a :class:`Failure` naming what is wrong: one env's malformed
    answer ends that env's episode, as an exception would, instead of costing every env its result."""
    if isinstance(outcome, Failure) or isinstance(call, Call):
        return outcome
    problem = _step_problem(outcome) if isinstance(call, Step) else _reset_problem(outcome)
    if problem is not None:
        return Failure(f"InvalidArgument: {problem}")
    if isinstance(call, Step):  # the reward as the float the batch holds (a 10**400 int was refused above)
        obs, reward, terminated, truncated, info = outcome
        return obs, _finite_float(reward), terminated, truncated, info
    return outcome


def _step_problem(outcome: Any) -> str | None:
    if not (isinstance(outcome, (tuple, list)) and len(outcome) == 5):
        return f"the env's step returned {_shape(outcome)}; a step returns (observation, reward, terminated, truncated, info)"
    _, reward, terminated, truncated, info = outcome
    if _finite_float(reward) is None:
        # One NaN normalized with the batch's returns makes every advantage NaN.
        try:
            shown = f"{reward!r:.80}"
        except Exception:  # noqa: BLE001 - e.g. an int of more digits than Python turns into a string
            shown = f"a {type(reward).__name__} that cannot be shown"
        return f"the env's reward is {shown}; rewards must be finite numbers (a float must hold them)"
    if not all(isinstance(flag, (bool, np.bool_, numbers.Integral)) for flag in (terminated, truncated)):
        return f"the env's terminated and truncated are {terminated!r:.40} and {truncated!r:.40}; they must be bools"
    return _info_problem(info)


def _finite_float(reward: Any) -> float | None:
    """``reward`` as a finite float, or None if it is not a real number or a float cannot hold it (``10**400``)."""
    if not isinstance(reward, numbers.Real):
        return None
    try:
        value = float(reward)
    except Exception:  # noqa: BLE001 - OverflowError past float's range, or any error of an odd Real's __float__
        return None
    return value if math.isfinite(value) else None


def _reset_problem(outcome: Any) -> str | None:
    if not (isinstance(outcome, (tuple, list)) and len(outcome) == 2):
        return f"the env's reset returned {_shape(outcome)}; a reset returns (observation, info)"
    return _info_problem(outcome[1])


def _info_problem(info: Any) -> str | None:
    return None if isinstance(info, Mapping) else f"the env's info is a {type(info).__name__}; infos must be dicts"


def _shape(outcome: Any) -> str:
    return f"a {type(outcome).__name__} of {len(outcome)}" if isinstance(outcome, (tuple, list)) else f"a {type(outcome).__name__}"


class _StepBatch:
    """The arrays one step returns, filled env by env."""

    def __init__(self, num_envs: int):
        self.rewards = np.zeros(num_envs, dtype=np.float64)
        self.terminated = np.zeros(num_envs, dtype=np.bool_)
        self.truncated = np.zeros(num_envs, dtype=np.bool_)
        self.infos: dict[str, Any] = {}

    def add_info(self, vec: VectorEnv, info: dict[str, Any], index: int) -> None:
        self.infos = vec._add_info(self.infos, info, index)
