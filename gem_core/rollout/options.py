"""The episode options (turn and token limits, system prompt, history mode, ...) and the rules they follow.

:class:`EpisodeOptions` holds the options of one episode, checked once when it is built; :class:`EpisodeSession`,
:func:`run_episode`, :func:`run_episodes`, :func:`run_labels` and the adapters take it as ``options=``
(the old keywords still work: a call builds one ``EpisodeOptions`` from them).

Adapters read these from a framework's config (verl's YAML, OpenRLHF's ``AgentConfig``, a
``GemRolloutFunc`` field). Checked where the config is built, a bad value is one ``ValueError`` naming the
config and the key; unchecked, it surfaces at the first episode inside the trainer's workers as a
comparison error between a str and an int, or trains on nothing (``max_new_tokens=0`` samples empty
moves).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.rollout.chat_template import HISTORY_MODES
from gem_core.rollout.policy import _MAX_COUNT
from gem_core.wrappers.turn_limit import check_max_turns

__all__ = ["EpisodeOptions", "check_episode_options", "episode_options"]


def _count(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or int(value) < 1:
        return "must be a positive whole number, or None"
    if int(value) > _MAX_COUNT:  # SamplingParams refuses it too, but only inside the first rollout, naming itself
        return f"is past {_MAX_COUNT}, the most a backend takes (vLLM and SGLang keep token counts in 32-bit integers); give a smaller number, or None"
    return None


def _copies(value: Any) -> str | None:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1:
        return None
    return "must be a positive whole number"


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "must be a str, or None"


def _discount(value: Any) -> str | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and 0 <= float(value) <= 1:
        return None
    return "must be a number in [0, 1] (a discount over turns)"


_RULES = {
    "max_new_tokens": _count,
    "max_total_tokens": _count,
    "max_response_tokens": _count,
    "system_prompt": _text,
    "gamma": _discount,
}


def check_episode_options(owner: str, **options: Any) -> None:
    """Raise ValueError naming ``owner`` and the key of the first option that breaks its rule.

    Keys: ``max_turns`` (:func:`~gem_core.wrappers.turn_limit.check_max_turns`, the registry's rule),
    ``max_new_tokens``, ``max_total_tokens``, ``max_response_tokens`` (positive whole numbers up to ``2**31 - 1``, or None),
    ``system_prompt`` (a str or None), any key ending in ``gamma`` (a number in [0, 1]), and counts of
    episodes, any key ending in ``_per_prompt`` (a GRPO group's size) or starting with ``num_`` (positive
    whole numbers, never None).

    Raises:
        InvalidArgument: if an option breaks its rule.
        InvalidArgumentType: if a key has no rule (a caller's typo).
    """
    for key, value in options.items():
        if key == "max_turns":
            check_max_turns(value, owner)
            continue
        rule = _copies if key.endswith("_per_prompt") or key.startswith("num_") else _RULES.get("gamma" if key.endswith("gamma") else key)
        if rule is None:
            raise InvalidArgumentType(f"check_episode_options: no rule for {key!r}; known: max_turns, {', '.join(_RULES)}, *_per_prompt, num_*.")
        problem = rule(value)
        if problem:
            raise InvalidArgument(f"{owner}: {key}={value!r} {problem}.")


def _history(value: Any) -> str | None:
    return None if value in HISTORY_MODES and isinstance(value, str) else f"must be one of {HISTORY_MODES}"


def _template_kwargs(value: Any) -> str | None:
    if value is None or (isinstance(value, Mapping) and all(isinstance(key, str) for key in value)):
        return None
    return 'must be a dict of template variables with str keys (e.g. {"enable_thinking": False}), or None'


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be True or False"


@dataclass(frozen=True)
class EpisodeOptions:
    """The options of an episode, checked once here instead of in every function that passes them on.

    :class:`~gem_core.rollout.session.EpisodeSession`, :func:`~gem_core.rollout.runner.run_episode`,
    :func:`~gem_core.rollout.runner.run_episodes`, :func:`~gem_core.rollout.runner.run_labels` and the adapters
    take one as ``options=``; build it where the settings are read (a framework's config) and pass it down.
    Frozen: change a field with :func:`dataclasses.replace`, which checks it again.

    Args:
        max_turns: The trainer's turn budget: the episode is truncated after this many turns (verl's
            ``max_assistant_turns``, RL2's ``rollout.max_turns``). None: only the env's own limit.
        max_total_tokens: Bound on ``len(prompt_ids) + len(response_ids)``. None: unbounded.
        max_response_tokens: Bound on ``len(response_ids)`` (all turns, env tokens included), the form trainers
            state their budget in (TRL's ``max_completion_length``, verl's ``response_length``). None: unbounded.
        system_prompt: A system message before the first user turn. None: none.
        history: What the policy sees of earlier turns: ``"as_sampled"`` (the sampled tokens) or
            ``"as_rendered"`` (the chat template's own rendering, for templates that rewrite past turns).
        chat_template_kwargs: Template variables (e.g. ``{"enable_thinking": False}``). None: none.
        record_env_states: Keep the env's state before each turn's action in the trajectory, so a stored
            episode can be branched at any turn (costs a copy and a pickle of the state per turn).

    Raises:
        InvalidArgument: A field is out of range or of the wrong kind; the message names the field and what it must be.

    Example:
        >>> from gem_core.rollout import EpisodeOptions
        >>> EpisodeOptions(max_turns=8, max_response_tokens=4096).max_turns
        8
    """

    max_turns: int | None = None
    max_total_tokens: int | None = None
    max_response_tokens: int | None = None
    system_prompt: str | None = None
    history: str = "as_sampled"
    chat_template_kwargs: Mapping[str, Any] | None = None
    record_env_states: bool = False

    def __post_init__(self) -> None:
        where = "EpisodeOptions"
        check_max_turns(self.max_turns, where)
        for name, rule in _FIELD_RULES.items():
            value = getattr(self, name)
            problem = rule(value)
            if problem:
                raise InvalidArgument(f"{where}: {name}={value!r} {problem}.")  # the rule says what to set
        for name in ("max_turns", "max_total_tokens", "max_response_tokens"):
            if getattr(self, name) is not None:  # numpy's ints too, as plain ints
                object.__setattr__(self, name, int(getattr(self, name)))


_FIELD_RULES = {
    "max_total_tokens": _count,
    "max_response_tokens": _count,
    "system_prompt": _text,
    "history": _history,
    "chat_template_kwargs": _template_kwargs,
    "record_env_states": _flag,
}
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EpisodeOptions)}
#: Frozen, so shared: each session read its own copy every turn, a cache line more per turn with hundreds in flight.
_DEFAULT_OPTIONS = EpisodeOptions()


def episode_options(options: EpisodeOptions | None, owner: str, **keywords: Any) -> EpisodeOptions:
    """The options of a call that takes ``options=`` beside the old keywords (``max_turns=``, ...).

    Keywords left at their defaults are not counted as given.

    Raises:
        InvalidArgumentType: ``options`` is not an :class:`EpisodeOptions`, or a keyword is not one of its fields.
        InvalidArgument: Both ``options`` and a keyword were given, or a keyword's value breaks its field's rule.
    """
    unknown = set(keywords) - set(_DEFAULTS)
    if unknown:
        raise InvalidArgumentType(f"{owner}: {', '.join(sorted(unknown))} is not an episode option; the options are {', '.join(_DEFAULTS)}.")
    given = {name: value for name, value in keywords.items() if value is not _DEFAULTS[name] and value != _DEFAULTS[name]}
    if options is None:
        if not given:  # one object for every episode with the defaults, as when a driver passes its options down
            return _DEFAULT_OPTIONS
        try:
            return EpisodeOptions(**given)
        except InvalidArgument as exc:  # the same rule, named after the call the user made
            raise InvalidArgument(str(exc).replace("EpisodeOptions:", f"{owner}:", 1)) from None
    if not isinstance(options, EpisodeOptions):
        raise InvalidArgumentType(f"{owner}: options must be an EpisodeOptions, got {type(options).__name__}; build one with EpisodeOptions(max_turns=..., ...).")
    if given:
        raise InvalidArgument(
            f"{owner}: got options= and also {', '.join(f'{k}={v!r}' for k, v in given.items())}; set them on the options instead: "
            f"dataclasses.replace(options, {', '.join(f'{k}=...' for k in given)})."
        )
    return options
