"""TRL's ``environment_factory`` route: TRL runs the tool-calling loop, a GEM env answers the calls.

``GRPOTrainer(environment_factory=Factory)`` builds ``Factory()`` with no arguments, calls
``reset(**row)`` before each rollout, exposes every other public method as a tool the model may call,
and uses ``get_reward()`` as a reward function. :func:`environment_factory` makes such a class for a
GEM env: the one tool, ``act(action)``, is ``env.step``; the reward is the episode return.

This route suits tool-calling models (TRL's recommendation). It re-renders text through the chat
template, so unlike :class:`~gem_adapters.trl.GemRolloutFunc` it is not token-exact, and per-turn
rewards reach TRL only as their sum. Warning: TRL tokenizes each tool result with its own
``apply_chat_template``, so observation text that spells a special token (``<|im_start|>assistant``) becomes
that control token in the trained sequence (stock TRL; GEM cannot change it): an env that echoes the model's
or a user's text lets the model forge turns. Use ``rollout_func`` (:class:`~gem_adapters.trl.GemRolloutFunc`)
for such envs.

The same classes serve TRL's asynchronous trainer (``trl.experimental.async_grpo.AsyncGRPOTrainer``): its
rollout worker sends ``environment_factory`` to a spawned process, so the classes made here pickle (as the
call that makes them). For a mixture, :func:`environment_factories` gives its dict form (one class per env,
so TRL logs one reward column per env), selected per row by the ``environment`` column that
:func:`with_environment_column` adds to a :func:`~gem_adapters.trl.make_dataset` dataset.
"""

from __future__ import annotations

import copyreg
import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, cast

from gem_adapters.framework_version import check_trl_version
from gem_adapters.trl.make_dataset import GEM_KEY, episode_label
from gem_core.env import warn_once
from gem_core.errors import InvalidArgument, InvalidArgumentType, ResetNeeded
from gem_core.protocols import TextEnv
from gem_core.rows import EpisodeLabel, LabelError, make_label_env, parse_label

__all__ = ["environment_factory", "environment_factories", "GemToolEnvironment", "with_environment_column"]

_SEED_FIX = "Give the dataset a 'seed' column of such integers, or build it with gem_adapters.trl.make_dataset."

logger = logging.getLogger("gem.rollout")  # the core's: an env error is logged once per env id, whichever route met it


class _EnvironmentClass(type):
    """The type of the classes :func:`environment_factory` makes: they pickle as the call that makes them."""

    env_id: str | None  # each class's own, set by _environment_class
    env_kwargs: dict[str, Any]


class GemToolEnvironment(metaclass=_EnvironmentClass):
    """Base of the classes :func:`environment_factory` returns (TRL instantiates them without arguments).

    The episode is chosen by the row: a prompt built by :func:`gem_adapters.trl.make_dataset` (the env
    id, seed and kwargs ride in its last message; a row of an env other than the class's default is refused,
    and so is one built without the class's kwargs, whose prompt describes another game than the one played),
    else the row's ``seed`` column with the class's default env (a row with neither is refused: every copy
    of a GRPO group would play a different game). A labelled row's prompt already is the env's first
    observation, so ``reset`` returns ``None``; on the seed route the dataset's prompt is the same for every
    seed, so ``reset`` returns the first observation, which TRL appends to the prompt's last message.

    An episode still running when TRL asks for the reward (the model answered without calling ``act``, or
    TRL's ``max_tool_calling_iterations`` cut it) ends there as truncated, like a ``max_turns`` cut on the
    ``rollout_func`` route: it scores its moves so far, and one that never moved is stepped once with the empty
    action, so it pays the env's own penalty for a move without one (ignoring the tool must not outscore a
    malformed move).

    An env step that raises, or answers with a reward that is not a finite number or an observation that is not
    text, ends the episode as an env error, by the core's rule (as on the ``rollout_func`` route): that turn scores
    0, the episode is truncated, ``infos[-1]["error"]`` says why and ``env_error_turns`` counts it (reward functions
    read both through TRL's ``environments`` keyword), the first such error of each env id is logged, and the tool
    answers that the game is over.
    """

    env_id: str | None = None
    env_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        self.env: TextEnv | None = None
        self.rewards: list[float] = []
        self.infos: list[dict[str, Any]] = []
        """Each move's ``info`` from the env (``"error"`` on a move that ended the episode as an env error)."""
        self.done = False
        self.truncated = False
        """Whether the episode was cut short (the env's truncation or an env error), not ended by the game."""

    @property
    def env_error_turns(self) -> int:
        """The episode's moves that ended in an env error (0 or 1; the rollout_func route's ``env_error_turns``)."""
        return sum(1 for info in self.infos if "error" in info)

    def reset(self, **row: Any) -> str | None:
        """Start the episode a dataset row names (closing the previous one); TRL calls this before each rollout.

        Args:
            **row: The dataset row: a ``prompt`` from :func:`~gem_adapters.trl.make_dataset` (its ``gem`` label
                names env, seed and kwargs), or else a ``seed`` column for the class's default env.

        Returns:
            None for a row from ``make_dataset`` (its prompt is the env's first observation); on the seed route,
            the env's first observation after a blank line, for TRL to append to the prompt's last message.

        Raises:
            InvalidArgument: The row's label names another env than the class's ``env_id``, or lacks a kwarg of the
                class's ``env_kwargs`` (its prompt was rendered without it; a row's own value wins), or the row has no
                label and there is no default ``env_id`` or no ``seed`` column, or that column's seed is not an
                integer from 0 to :data:`~gem_core.rows.label.MAX_SEED`.
            LabelError: The row's label is malformed or names an unknown env.
            EnvKwargsError: The episode's env kwargs do not fit its env, or name a placement keyword (``env_backend``,
                ``pool``...): a row does not choose where its env runs.
        """
        prompt = row.get("prompt")
        env_id, seed, env_kwargs = self.env_id, row.get("seed"), dict(self.env_kwargs)
        labelled = isinstance(prompt, list) and bool(prompt) and isinstance(prompt[-1], dict) and bool(prompt[-1].get(GEM_KEY))
        if labelled:
            label, _ = episode_label(prompt)
            if env_id not in (None, label.env_id):  # the row's env would be played in silence
                raise InvalidArgument(f"environment_factory({env_id!r}) got a dataset row of {label.env_id!r}: give environment_factory the rows' "
                                 f"env id ({label.env_id!r}), or no env id (rows from make_dataset name their own env).")
            # A kwarg the row has was rendered into its prompt and wins; one it lacks was not: its prompt describes the default.
            unmatched = {key: value for key, value in env_kwargs.items() if key not in label.env_kwargs}
            if unmatched:  # the prompt, rendered by make_dataset, describes the game without them: the model would play another
                raise InvalidArgument(
                    f"environment_factory({env_id!r}, ...) got a make_dataset row built without its env kwargs {unmatched!r} (the row's "
                    f"env_kwargs: {label.env_kwargs!r}), so the row's prompt describes another game than the one played; pass them to "
                    f"make_dataset(..., env_kwargs={env_kwargs!r}) so the prompt matches, or leave them out of environment_factory.")
            env_id, seed, env_kwargs = label.env_id, label.seed, dict(label.env_kwargs)
        elif env_id is None or seed is None:  # seed=None: every copy of a GRPO group would draw its own game
            raise InvalidArgument(f"environment_factory({env_id!r}) cannot tell which episode to reset: the dataset row has no GEM label, so it needs "
                             "a default env_id and a 'seed' column; give the dataset a 'seed' column, or build it with gem_adapters.trl.make_dataset.")
        else:  # a label's seed rule: gymnasium's own error names neither the column nor the fix, and lets True or 2**70 through
            try:
                parse_label({"env_id": env_id, "seed": seed}, fix_hint=_SEED_FIX)
            except LabelError as err:
                raise InvalidArgument(f"environment_factory({env_id!r}) cannot reset to the dataset row's 'seed' column: {err}") from None
        if self.env is not None:
            self.env.close()
        # make_label_env, not placement.make_env: a row's env_kwargs must not choose the placement ({"env_backend": "local"}
        # overrode the job's $GEM_ENV_BACKEND), and kwargs that do not fit are named with the env's registered ones.
        self.env = make_label_env(EpisodeLabel(env_id, seed, env_kwargs))
        observation, _ = self.env.reset(seed=seed)
        self.rewards, self.infos, self.done, self.truncated = [], [], False, False
        if labelled:
            return None
        return f"\n\n{observation}"  # TRL appends it to the last message as is: a blank line keeps it off the row's text

    def act(self, action: str) -> str:
        """Make your move in the game.

        Args:
            action: The move, written the way the game's instructions ask (for example \\boxed{50}).

        Returns:
            The game's reply: what happened, and the reward.

        Raises:
            ResetNeeded: The game has not started or is over.
        """
        if self.env is None:
            raise ResetNeeded("The game has not started yet.")
        if self.done:
            raise ResetNeeded("The game is over; no more moves are accepted.")
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
            if not (isinstance(reward, numbers.Real) and math.isfinite(reward)):  # one NaN makes the group's advantages NaN
                raise InvalidArgument(f"the env's reward is {reward!r}; rewards must be finite numbers")
            if not isinstance(observation, str):
                raise InvalidArgument(f"the env's observation is a {type(observation).__name__}; an episode's observations are text")
        except Exception as exc:  # noqa: BLE001 - a broken env step ends this episode, not the run (the core's rule)
            error = f"{type(exc).__name__}: {exc}"
            self.rewards.append(0.0)
            self.infos.append({"error": error})
            self.done = self.truncated = True
            env_id = getattr(self.env, "env_id", None)
            warn_once(logger, ("episode-error", env_id), "Episode of env %r ended by an error (truncated, reward 0; later errors "
                      "of this env are not logged, GemToolEnvironment.env_error_turns counts them): %s", env_id, error)
            return f"The game stopped with an error ({error}); this move scores 0. The game is over."
        self.rewards.append(float(reward))
        self.infos.append(dict(info))
        self.done = bool(terminated or truncated)
        self.truncated = bool(truncated)
        suffix = " The game is over." if self.done else ""
        return f"{observation}\n(reward {float(reward):+g}){suffix}"

    def get_reward(self) -> float:
        """The episode return; TRL calls this once the rollout ends, so an episode still running ends here, truncated.

        An episode the model never moved in is first stepped with the empty action: it pays the env's penalty for
        a move without one, as the ``rollout_func`` route pays a reply without a move (else ignoring the tool
        would outscore any malformed move). One that moved keeps its moves' sum, like a ``max_turns`` cut.
        """
        if self.env is not None and not self.done:
            if not self.rewards:
                self.act("")  # the env's own answer to no move (an env error here ends it as one, scoring 0)
            self.done = self.truncated = True
        return float(sum(self.rewards))


_MADE = "_made_by_environment_factory"
"""The class attribute that marks a class :func:`environment_factory` made (not inherited: read from the class's own namespace)."""


def _environment_class(env_id: str | None, env_kwargs: dict[str, Any]) -> type[GemToolEnvironment]:
    name = "GemEnv" if env_id is None else "GemEnv_" + "".join(ch if ch.isalnum() else "_" for ch in env_id)
    namespace = {"env_id": env_id, "env_kwargs": dict(env_kwargs), "__module__": __name__, _MADE: True}
    made = _EnvironmentClass(name, (GemToolEnvironment,), namespace)
    return cast("type[GemToolEnvironment]", made)  # the metaclass call makes a GemToolEnvironment subclass


def _reduce_environment_class(cls: _EnvironmentClass) -> Any:
    # A class made at run time is not a module attribute, so pickle cannot name it; it is rebuilt instead
    # (AsyncGRPOTrainer's rollout worker pickles environment_factory into a spawned process). Any other class,
    # a user's subclass with its own env id and tools included, pickles by name as usual.
    if not vars(cls).get(_MADE, False):
        return cls.__qualname__
    return _environment_class, (cls.env_id, dict(cls.env_kwargs))


copyreg.pickle(_EnvironmentClass, _reduce_environment_class)


def environment_factory(env_id: str | None = None, **env_kwargs: Any) -> type[GemToolEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)``; ``env_id`` is the default env for rows that
    do not name one (rows from :func:`~gem_adapters.trl.make_dataset` always do; they must name this one).

    ``env_kwargs`` (e.g. ``max_turns``) apply to every episode of the seed route; a ``make_dataset`` row must have
    been built with each of them (``make_dataset(..., env_kwargs=...)``), since its prompt was rendered with the row's
    own kwargs, whose values win. With an ``env_id`` the env is built once here, so a wrong id or kwargs fail now, not in the trainer.

    Returns:
        A :class:`GemToolEnvironment` subclass for that env id (pickles as this call, for TRL's async trainer).

    Raises:
        UnknownEnvError: ``env_id`` is not registered (naming the closest ids).
        EnvKwargsError: ``env_kwargs`` holds a keyword the env does not take (naming its registered kwargs).
        TRLVersionError: The installed TRL is not a supported version (the message gives the install line).
    """
    check_trl_version()  # a wrong TRL install fails here with the install line (reads metadata only; no import of trl)
    if env_id is not None:  # an unknown id, or kwargs the env does not take, fail here (naming the closest ids, the registered kwargs)
        make_label_env(EpisodeLabel(env_id, 0, dict(env_kwargs))).close()
    return _environment_class(env_id, env_kwargs)


def environment_factories(env_ids: Sequence[str] | Mapping[str, float], **env_kwargs: Any) -> dict[str, type[GemToolEnvironment]]:
    """The dict form of ``environment_factory`` for several envs (a list of ids or a mixture ``{env_id: weight}``):
    ``{env_id: environment_factory(env_id, **env_kwargs)}``.

    TRL picks each row's class by the row's ``environment`` column, which must hold the env id of the
    row's label: give it ``with_environment_column(make_dataset(env_ids, n))``.

    Raises:
        InvalidArgument: ``env_ids`` is empty (TRL would fail on an empty dict of factories, naming neither).
        InvalidArgumentType: ``env_ids`` is one id (a str), for which :func:`environment_factory` is the call, or
            neither a list nor a mixture.
        UnknownEnvError: An id is not registered (naming the closest ids).
        EnvKwargsError: ``env_kwargs`` holds a keyword an env does not take.
    """
    if isinstance(env_ids, str):
        raise InvalidArgumentType(f"environment_factories takes several env ids (a list or a {{env_id: weight}} mixture); for one, use environment_factory({env_ids!r}).")
    if not isinstance(env_ids, (Sequence, Mapping)):  # iterating it would fail with a bare TypeError
        raise InvalidArgumentType(f"environment_factories: env_ids must be a list of env ids or a mixture {{env_id: weight}}, got {type(env_ids).__name__} {env_ids!r}.")
    if not env_ids:
        raise InvalidArgument(f"environment_factories: env_ids={env_ids!r} names no env; give at least one env id, e.g. "
                              "environment_factories(['game:Wordle-v0']) or a mixture {env_id: weight}.")
    return {env_id: environment_factory(env_id, **env_kwargs) for env_id in env_ids}


def with_environment_column(dataset: Any) -> Any:
    """``dataset`` (from :func:`~gem_adapters.trl.make_dataset`) with an ``environment`` column holding each
    row's env id: the column by which TRL's dict-form ``environment_factory`` picks a row's env.

    Raises:
        InvalidArgumentType: ``dataset`` is not a ``datasets.Dataset`` (a ``DatasetDict`` is given per split).
        InvalidArgument: ``dataset`` has no ``prompt`` column or already has an ``environment`` column (datasets'
            own errors named neither fix), or a prompt has no GEM label (it was not made by ``make_dataset``).
        LabelError: A prompt's label is malformed or names an unknown env.
    """
    from datasets import Dataset  # the caller's dataset already loaded it

    if not isinstance(dataset, Dataset):
        raise InvalidArgumentType(f"with_environment_column takes a datasets.Dataset (from make_dataset), got {type(dataset).__name__}; "
                                  "for a DatasetDict, give each split.")
    if "prompt" not in dataset.column_names:
        raise InvalidArgument(f"with_environment_column: the dataset has no 'prompt' column (its columns: {dataset.column_names}); "
                              "build it with gem_adapters.trl.make_dataset, whose prompts name each row's env.")
    if "environment" in dataset.column_names:
        raise InvalidArgument("with_environment_column: the dataset already has an 'environment' column; give the dataset without it "
                              "(dataset.remove_columns('environment')), or use it as it is if it holds each row's env id.")
    return dataset.add_column("environment", [episode_label(prompt)[0].env_id for prompt in dataset["prompt"]])
