"""One episode as tokens: what the policy sampled, what the env said, and what each turn earned.

A :class:`TokenTrajectory` is the single record every adapter reshapes. It keeps the sampled ids
verbatim (never decoded and re-encoded), so log-probabilities recomputed by a trainer on
``prompt_ids + response_ids`` are those of the policy that acted. Two training views:

- :meth:`TokenTrajectory.as_sequence`: one sample per episode, env tokens masked out of the loss and
  each turn's reward on that turn's last sampled token;
- :meth:`TokenTrajectory.as_transitions`: one sample per turn (context so far, the turn's action) with
  the turn's discounted return ``G_t = r_t + gamma * G_{t+1}``, the input of REINFORCE with Return
  Batch Normalization (:func:`gem_core.rollout.advantages.return_batch_normalize`).

With a template that rewrites earlier turns (drops thinking), ``prompt_ids + response_ids`` holds the
tokens as sampled, thinking included. With ``history="as_sampled"`` (default) that sequence is what the
policy saw, and ``Transition.context_ids`` is a prefix of it. With ``history="as_rendered"`` the policy
saw the template's rendering of the conversation (earlier thinking stripped): each turn's context is
``rendered_ids[:rendered_context_ends[t]] + generation_prompt_ids``, the episode is trained per turn
through :meth:`TokenTrajectory.as_transitions`, and :meth:`TokenTrajectory.as_sequence` refuses (its
single sequence would not be what the policy conditioned on).

Off-policy training needs to know which weights sampled each token: ``token_versions`` holds, per response
token, the policy version that sampled it (-1 on env and template tokens), recorded when the policy carries a
version (:class:`gem_core.rollout.policy_version.VersionedPolicy`); :attr:`TokenTrajectory.oldest_version` and
:attr:`TokenTrajectory.newest_version` summarize it. ``logprobs`` on those tokens are the behaviour policy's.

Checked on construction: ``loss_mask``, ``logprobs`` (and ``token_versions`` when recorded: ints from -1) align with
``response_ids``; one finite reward per turn (an int or float, not text or a bool); each turn span is a pair of ints
that lies in ``response_ids`` (``0 <= start <= end <= len(response_ids)``, empty spans allowed), in turn order and not
overlapping; ``history`` is one of :data:`~gem_core.rollout.chat_template.HISTORY_MODES`, the rendered fields are set
only with ``"as_rendered"``, and then one rendered context end per turn, within ``rendered_ids`` and never going back
(O(turns), no pass over the tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rollout.advantages import check_finite, discounted_returns
from gem_core.rollout.chat_template import HISTORY_MODES

__all__ = ["SequenceSample", "TokenTrajectory", "Transition"]

#: The fields only a ``history="as_rendered"`` trajectory sets.
_RENDERED_FIELDS = ("rendered_ids", "rendered_context_ends", "generation_prompt_ids")


@dataclass
class SequenceSample:
    """One episode as one training sequence."""

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    """1 on sampled tokens, 0 on env and template tokens."""
    logprobs: list[float]
    """Aligned to ``response_ids``; 0.0 where ``loss_mask`` is 0."""
    token_rewards: list[float]
    """Aligned to ``response_ids``; each turn's reward on its last sampled token."""
    reward: float
    """The episode return (sum of per-turn rewards)."""


@dataclass
class Transition:
    """One turn as one training sample."""

    context_ids: list[int]
    """All ids before this turn's action (prompt, earlier turns, the latest observation)."""
    action_ids: list[int]
    """The ids sampled this turn (the end-of-turn token included when sampled)."""
    action_logprobs: list[float]
    reward: float
    """This turn's reward r_t."""
    return_: float
    """Discounted return G_t = r_t + gamma * G_{t+1}."""
    done: bool
    """True for the episode's last turn when the episode has ended."""
    turn: int
    """Index of the turn, from 0."""


@dataclass
class TokenTrajectory:
    """One episode in tokens. See the module docstring for the invariants."""

    prompt_ids: list[int]
    response_ids: list[int]
    """Policy tokens and env tokens after the prompt, in order."""
    loss_mask: list[int]
    """1 exactly on sampled policy tokens."""
    logprobs: list[float]
    """Aligned to ``response_ids``; 0.0 on env tokens (and on policy tokens when the policy gave none)."""
    turn_spans: list[tuple[int, int]]
    """``[start, end)`` of each turn's sampled tokens within ``response_ids``."""
    rewards: list[float]
    """One per turn."""
    terminated: bool
    truncated: bool
    env_id: str | None = None
    seed: int | None = None
    observations: list[str] = field(default_factory=list)
    """Texts shown to the policy (the first is the initial observation)."""
    actions: list[str] = field(default_factory=list)
    """Decoded action texts, as passed to ``env.step``."""
    infos: list[dict[str, Any]] = field(default_factory=list)
    """The env's info dict of each step."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Episode statistics: num_turns, format_errors, success, num_tokens, ..."""
    final_observation: str | None = None
    """The env's last observation (not shown to the policy when the episode ended)."""
    history: str = "as_sampled"
    """What the policy saw of earlier turns: ``"as_sampled"`` or ``"as_rendered"`` (module docstring)."""
    rendered_ids: list[int] | None = None
    """``"as_rendered"``: the conversation as the template renders it, without a generation prompt."""
    rendered_context_ends: list[int] = field(default_factory=list)
    """``"as_rendered"``: per turn, how much of ``rendered_ids`` the policy saw before sampling."""
    generation_prompt_ids: list[int] = field(default_factory=list)
    """``"as_rendered"``: appended to each turn's rendered context (the template's generation prompt)."""
    images: list[Any] = field(default_factory=list)
    """Image observations (:class:`gem_core.rollout.vision.TrajectoryImage`), in sequence order: each
    with its turn, where its placeholder ids start in ``prompt_ids + response_ids``, and its pixel inputs
    (:func:`gem_core.rollout.vision.multimodal_inputs` turns them into the model's ``pixel_values`` and
    ``image_grid_thw``). Empty for text-only episodes."""
    env_states: list[str] = field(default_factory=list)
    """With ``record_env_states=True``: per turn, the env's :meth:`~gem_core.env.Env.get_state` before that
    turn's action, encoded as text by :func:`gem_core.rollout.trajectory_io.encode_env_state` (a stored
    episode can branch at any turn). Empty otherwise."""
    token_versions: list[int] = field(default_factory=list)
    """Aligned to ``response_ids``: the policy version that sampled each token, -1 on env and template
    tokens (and on a turn whose policy carried no version). Empty when no turn was sampled by a versioned
    policy."""

    @classmethod
    def _from_checked_parts(cls, fields: dict[str, Any]) -> TokenTrajectory:
        """The trajectory ``cls(**fields)`` makes, without running :meth:`__post_init__`'s checks: for a producer that
        keeps every invariant as it records (:class:`~gem_core.rollout.session.EpisodeSession` builds one per episode,
        for every episode of a run). Every field must be given. The rollout tests run the checks on each one.

        ``fields`` becomes the trajectory's ``__dict__``, so it must be a fresh dict that the caller keeps no hold of.
        Handing it over costs a tenth of passing the 22 fields as keywords and copying them in (0.2 against 2.1 us,
        once per episode of a run)."""
        trajectory = cls.__new__(cls)
        trajectory.__dict__ = fields
        return trajectory

    def __post_init__(self) -> None:
        n = len(self.response_ids)
        if len(self.loss_mask) != n or len(self.logprobs) != n:
            raise InvalidArgument(
                f"response_ids ({n}), loss_mask ({len(self.loss_mask)}) and logprobs ({len(self.logprobs)}) "
                "must have the same length."
            )
        if self.token_versions and len(self.token_versions) != n:
            raise InvalidArgument(
                f"token_versions has {len(self.token_versions)} entries for {n} response ids; need one per id (or none)."
            )
        versions = self.token_versions
        # None or a bool built, then oldest_version raised TypeError or counted True as version 1; a -7 read as unversioned.
        if versions and (not set(map(type, versions)) <= {int} or min(versions) < -1):
            i, value = next((i, v) for i, v in enumerate(versions) if type(v) is not int or v < -1)
            if type(value) is not int:
                raise InvalidArgument(
                    f"token_versions[{i}] is {value!r}: versions must be ints (the policy version from 0, -1 where none is "
                    f"known), not {type(value).__name__}."
                )
            raise InvalidArgument(f"token_versions[{i}] is {value}: a version is the policy version from 0, or -1 where none is known.")
        if len(self.turn_spans) != len(self.rewards):
            raise InvalidArgument(f"{len(self.turn_spans)} turn spans but {len(self.rewards)} rewards; need one per turn.")
        rewards = self.rewards
        # A list of finite floats (every session's) passes without numpy: only floats, and their sum finite (an
        # inf or NaN makes it inf or NaN; a sum that merely overflows is sent to the full check, which passes it).
        kinds = set(map(type, rewards)) if type(rewards) in (list, tuple) else None
        if kinds is None or not kinds <= {float} or not math.isfinite(sum(rewards)):
            if kinds is not None and bool in kinds:  # numpy reads [True, 0.5] as floats; a file keeps true, and is refused
                i, value = next((i, r) for i, r in enumerate(rewards) if type(r) is bool)
                raise InvalidArgument(f"rewards[{i}] is {value}: rewards must be numbers, not bools; pass float({value}).")
            check_finite("rewards", rewards, ndim=1)
        previous_end = 0
        for i, span in enumerate(self.turn_spans):
            try:
                start, end = span
            except (TypeError, ValueError):  # (start, end, extra) or a bare number: a builtin error before
                raise InvalidArgument(f"turn_spans[{i}] is {span!r}: a turn span is a (start, end) pair of token indices.") from None
            if type(start) is not int or type(end) is not int:  # a float or bool slices nothing (TypeError in each view)
                raise InvalidArgument(f"turn_spans[{i}] is {(start, end)!r}: span bounds must be int token indices.")
            if not 0 <= start <= end <= n:
                raise InvalidArgument(f"turn_spans[{i}] is ({start}, {end}): need 0 <= start <= end <= len(response_ids) ({n}).")
            if start < previous_end:
                raise InvalidArgument(
                    f"turn_spans[{i}] is ({start}, {end}): it starts before turn_spans[{i - 1}] ends ({previous_end}); "
                    "spans must be in turn order and not overlap."
                )
            previous_end = end
        if self.env_states and len(self.env_states) != len(self.turn_spans):
            raise InvalidArgument(f"{len(self.env_states)} env states but {len(self.turn_spans)} turns; need one per turn (or none).")
        # The texts go to SFT and DPO rows (trajectory_io): an action paired with the wrong observation is wrong data.
        turns = len(self.turn_spans)
        if self.actions and len(self.actions) != turns:
            raise InvalidArgument(f"{len(self.actions)} actions but {turns} turns; need one per turn (or none).")
        if self.observations and not turns <= len(self.observations) <= turns + 1:
            raise InvalidArgument(
                f"{len(self.observations)} observations for {turns} turns; need one before each turn, and the one after the "
                "last while the episode goes on (or none)."
            )
        self._check_history(turns)

    def _check_history(self, turns: int) -> None:
        """``history`` is known and the rendered fields agree with it (O(turns): the context ends, not the ids)."""
        if not isinstance(self.history, str) or self.history not in HISTORY_MODES:
            raise InvalidArgument(f"history is {self.history!r}: must be one of {HISTORY_MODES}.")
        if self.history == "as_sampled":
            if (self.rendered_ids is None or not len(self.rendered_ids)) and not len(self.rendered_context_ends) and not len(self.generation_prompt_ids):
                return
            name = next(name for name in _RENDERED_FIELDS if len(getattr(self, name) or ()))  # None and [] are unset
            raise InvalidArgument(
                f"{name} is set but history is 'as_sampled': the rendered fields belong to history='as_rendered' episodes; "
                "set history='as_rendered' or leave them out."
            )
        ends = self.rendered_context_ends
        if self.rendered_ids is None or len(ends) != turns:
            raise InvalidArgument(
                f"An as_rendered trajectory needs rendered_ids and one rendered context end per turn; got "
                f"{'no' if self.rendered_ids is None else len(self.rendered_ids)} rendered ids and {len(ends)} rendered context "
                f"ends for {turns} turns."
            )
        size = len(self.rendered_ids)
        if not ends or (set(map(type, ends)) == {int} and 0 <= ends[0] and ends[-1] <= size and ends == sorted(ends)):
            return  # the usual case, at C speed; the loop below finds what is wrong
        previous = 0
        for i, end in enumerate(ends):
            if type(end) is not int:
                raise InvalidArgument(f"rendered_context_ends[{i}] is {end!r}: need an int, an index into rendered_ids.")
            if not 0 <= end <= size:
                raise InvalidArgument(f"rendered_context_ends[{i}] is {end}: need 0 <= end <= len(rendered_ids) ({size}).")
            if end < previous:
                raise InvalidArgument(
                    f"rendered_context_ends[{i}] is {end}: it goes back before rendered_context_ends[{i - 1}] ({previous}); "
                    "each turn's context extends the one before."
                )
            previous = end

    @property
    def num_turns(self) -> int:
        """How many turns the episode took."""
        return len(self.turn_spans)

    @property
    def oldest_version(self) -> int | None:
        """The oldest policy version among the sampled tokens; None when no token carries a version.

        The trainer's staleness of this episode is ``current_version - oldest_version``."""
        versions = self._sampled_versions()
        return min(versions) if versions else None

    @property
    def newest_version(self) -> int | None:
        """The newest policy version among the sampled tokens; None when no token carries a version."""
        versions = self._sampled_versions()
        return max(versions) if versions else None

    def _sampled_versions(self) -> list[int]:
        return [v for v, m in zip(self.token_versions, self.loss_mask, strict=False) if m and v >= 0]

    @property
    def episode_return(self) -> float:
        """The sum of the per-turn rewards (undiscounted)."""
        return float(sum(self.rewards))

    @property
    def token_rewards(self) -> list[float]:
        """``len(response_ids)`` rewards: each turn's reward on that turn's last sampled token.

        A turn that sampled no token has no token of its own; its reward goes with the last sampled token
        before it (the previous sampled turn's last token), or, for empty turns before any sampled token,
        with the first sampled turn's last token: never on an env or template token, which token-level
        estimators (GAE, REINFORCE++) skip. An episode that sampled no token at all keeps its return on the
        last response token. The rewards sum to :attr:`episode_return` whenever the response is non-empty.
        """
        out = [0.0] * len(self.response_ids)
        if not out:
            return out
        last_sampled = None  # the last token of the latest turn that sampled any
        waiting = 0.0  # the rewards of empty turns before any sampled token
        for (start, end), reward in zip(self.turn_spans, self.rewards, strict=True):
            if end > start:
                last_sampled = min(end - 1, len(out) - 1)
                out[last_sampled] += float(reward) + waiting
                waiting = 0.0
            elif last_sampled is not None:
                out[last_sampled] += float(reward)
            else:
                waiting += float(reward)
        out[-1] += waiting  # no turn sampled a token
        return out

    def returns(self, gamma: float = 1.0) -> list[float]:
        """Per-turn discounted returns ``G_t``."""
        return discounted_returns(self.rewards, gamma).tolist()

    def as_sequence(self) -> SequenceSample:
        """The whole episode as one sample.

        Raises:
            InvalidArgument: if the episode was played with ``history="as_rendered"`` (use :meth:`as_transitions`).
        """
        if self.history == "as_rendered":
            raise InvalidArgument(
                "This trajectory was played with history='as_rendered': the policy saw each turn's rendered context, "
                "not one growing sequence. Train it per turn with as_transitions(), or play with history='as_sampled'."
            )
        return SequenceSample(
            prompt_ids=list(self.prompt_ids),
            response_ids=list(self.response_ids),
            loss_mask=list(self.loss_mask),
            logprobs=list(self.logprobs),
            token_rewards=self.token_rewards,
            reward=self.episode_return,
        )

    def as_transitions(self, gamma: float = 1.0) -> list[Transition]:
        """One sample per turn, each carrying its discounted return ``G_t``."""
        returns = self.returns(gamma)
        ended = self.terminated or self.truncated
        rendered = self.rendered_ids if self.history == "as_rendered" else None  # by history, as the checks decide
        out = []
        for turn, ((start, end), reward) in enumerate(zip(self.turn_spans, self.rewards, strict=True)):
            if rendered is not None:
                context = rendered[: self.rendered_context_ends[turn]] + self.generation_prompt_ids
            else:
                context = list(self.prompt_ids) + self.response_ids[:start]
            out.append(
                Transition(
                    context_ids=context,
                    action_ids=self.response_ids[start:end],
                    action_logprobs=self.logprobs[start:end],
                    reward=float(reward),
                    return_=float(returns[turn]),
                    done=ended and turn == self.num_turns - 1,
                    turn=turn,
                )
            )
        return out
