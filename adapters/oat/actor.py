"""The oat actor and learner for GEM envs (``PPOMultiTurnActor`` / ``PPOMultiTurnLearner`` subclasses).

oat-llm 0.2.x imports vLLM and launchpad, so this module does not import oat at import time: the
episode collection lives in :class:`GemCollector` (plain Python, testable anywhere), and
:func:`actor_class` / :func:`learner_class` put it on oat's classes when called. ``GemActor`` and
``GemLearner`` (module attributes) are those classes built on first access.

The actor reads its settings from oat's args (extend ``PPOArgs`` with :class:`GemArgsMixin`'s fields):
``env_id``, ``num_env`` (concurrent episodes), ``max_turns``, ``max_total_tokens``, ``system_prompt``.

oat's ``ActorBase.generate`` asserts that the tokenizer's bos id is in the prompt ids it sent (vLLM adds
no bos to token-id prompts). Templates that write the bos pass; for one that never writes it (ChatML
templates of DeepSeek-style tokenizers), the first collection plays episodes with a copy of the
tokenizer whose template writes ``{{ bos_token }}`` first (:func:`tokenizer_writing_bos`), so the bos
is part of every prompt vLLM samples from and every prompt the loss sees.

Curriculum (``--curriculum '<sampler spec JSON>'``, :mod:`gem_core.curriculum`): oat's multi-turn actor
chooses its own episodes (``collect_experience``), so each actor keeps a task sampler: it draws the starts
of every batch of ``num_env`` episodes, is updated with their outcomes, and its metrics
(``actor/gem/task/<task>/...``, ``actor/gem/curriculum/<task>/...``) join what ``collect_experience`` returns,
which oat logs. Actors do not share one: each draws with its own seed and hands out its own seeds (offset
by the actor id). What oat leaves no hook for: the actor's state is not in oat's checkpoints, so with
``state_dir`` in the spec each actor writes ``state_dir/actor<id>/gem_task_sampler.json`` after every
collection and reads it back when it starts.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

from gem_adapters.framework_version import FrameworkVersionError, SupportedVersions
from gem_adapters.oat.policy import ActorPolicy
from gem_adapters.oat.transitions import oat_transitions
from gem_core.curriculum import (
    episode_outcome,
    load_sampler_state,
    record_outcomes,
    sampler_from_spec,
    sampler_spec,
    save_sampler_state,
    tag_task,
    task_metrics,
)
from gem_core.errors import GemError
from gem_core.protocols import Tokenizer
from gem_core.registry import spec as env_spec
from gem_core.rollout import ChatTemplate, EpisodeOptions, SamplingParams, run_labels, trajectory_metrics
from gem_core.rollout.options import check_episode_options

__all__ = [
    "GemArgsMixin", "GemCollector", "OatVersionError", "BosTokenError", "actor_class", "learner_class", "check_oat_version",
    "tokenizer_writing_bos",
]

logger = logging.getLogger(__name__)

class OatVersionError(FrameworkVersionError):
    """The installed oat has no multi-turn hook (added in 0.2.2) or a different one."""


SUPPORTED_OAT = SupportedVersions(
    "oat-llm", SpecifierSet(">=0.2.2,<0.3"), OatVersionError, adapter="gem_adapters.oat", feature="PPOMultiTurnActor",
    extra="oat", pin="oat-llm==0.2.4, Python 3.10",
)
check_oat_version = SUPPORTED_OAT.check
"""Fail at start-up unless oat-llm 0.2.x (with ``oat.algorithms.ppo_multiturn``) is installed (reads package metadata only).

Raises:
    OatVersionError: oat-llm is missing or not 0.2.x; the message gives the install line.
"""


class BosTokenError(GemError, ValueError):
    """The tokenizer has a bos token that oat requires in every prompt, and GEM cannot make the template write it."""


def _prompt_ids(tokenizer: Tokenizer, system_prompt: str | None) -> list[int]:
    return ChatTemplate.for_tokenizer(tokenizer, system_prompt=system_prompt).initial_ids("GEM")


def tokenizer_writing_bos(tokenizer: Tokenizer, system_prompt: str | None = None) -> Tokenizer:
    """``tokenizer``, or a copy whose chat template writes the bos token first if oat needs it and the template omits it.

    oat's ``ActorBase.generate`` asserts ``tokenizer.bos_token_id in prompt_token_ids`` whenever the
    tokenizer has a bos token; vLLM adds none to prompts given as ids, so the ids the template renders
    must hold it. The copy shares the tokenizer's vocabulary; only its ``chat_template`` differs, so the
    episode's prompt ids (sent to vLLM and trained on) start with the bos id.

    Raises:
        BosTokenError: the bos is still missing with ``{{ bos_token }}`` in front of the template (e.g. a
            bos token with no id); the message names the tokenizer and the fix.
    """
    bos = getattr(tokenizer, "bos_token", None)
    if not bos:  # oat checks only tokenizers with a bos token
        return tokenizer
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is not None and bos_id in _prompt_ids(tokenizer, system_prompt):
        return tokenizer
    template = tokenizer.chat_template
    patched = copy.copy(tokenizer)  # shallow: the same vocabulary and backend, its own chat_template
    if isinstance(template, dict):  # named templates: the one apply_chat_template picks is any of them
        patched.chat_template = {name: "{{ bos_token }}" + text for name, text in template.items()}
    else:
        patched.chat_template = "{{ bos_token }}" + str(template)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if bos_id is None or bos_id not in _prompt_ids(patched, system_prompt):
        raise BosTokenError(
            f"oat's actor requires the bos token {bos!r} (id {bos_id}) of tokenizer {name!r} in every prompt it sends to "
            "vLLM, but its chat template does not write it, and prepending '{{ bos_token }}' to the template did not "
            "help. Give the tokenizer a chat template that starts with '{{ bos_token }}' (tokenizer.chat_template = ...), "
            "or one whose bos token is a single token of its vocabulary."
        )
    logger.warning(
        "The chat template of %r does not write its bos token %r, which oat's actor requires in every prompt; "
        "GEM's episodes use the template with the bos first (it is part of every prompt trained on).", name, bos,
    )
    return patched


@dataclass
class GemArgsMixin:
    """Fields to add to oat's ``PPOArgs`` (``class Args(GemArgsMixin, PPOArgs)``)."""

    env_id: str = "game:GuessTheNumber-v0"
    """GEM env id."""
    num_env: int = 16
    """Episodes run concurrently per actor (their turns are batched into one vLLM call)."""
    max_turns: int | None = None
    """End episodes after this many turns (None: the env's own limit)."""
    max_total_tokens: int | None = 4096
    """Whole-episode token budget (prompt + every turn); each turn is also capped by generate_max_length."""
    system_prompt: str | None = None
    """System message before the first observation."""
    history: str = "as_sampled"
    """``as_rendered`` for templates that rewrite earlier turns (Qwen3): each turn's prompt is the history
    as the template renders it (oat trains one sample per turn, so both modes are exact)."""
    curriculum: str | None = None
    """A task sampler spec as JSON (:func:`gem_core.curriculum.sampler_from_spec`: ``tasks``, TaskSampler's
    arguments, and ``state_dir``): episodes start where it draws instead of at ``env_id``'s next seeds."""


class GemCollector:
    """``collect_experience`` for oat's multi-turn actor, built on the core's episode runner.

    Expects what oat's ``ActorBase.init`` sets: ``self.args``, ``self.tokenizer``,
    ``self.sampling_params`` (vLLM) and ``self.generate``; and ``self.actor_id``.
    """

    # oat's ActorBase.init sets these (annotations only: nothing here shadows the actor's own)
    args: Any
    tokenizer: Any
    sampling_params: Any
    generate: Callable[..., list[Any]]

    _gem_tokenizer: Any = None
    _gem_sampler: Any = None
    _gem_state_dir: str | None = None

    def collect_experience(self) -> tuple[list[list[Any]], dict[str, Any]]:
        """Run episodes until ``rollout_batch_size_per_device`` transitions are collected; all finished.

        Returns:
            ``(episodes, metrics)``: each episode's oat transitions, and the batch's ``actor/gem/*`` metrics (with a
            curriculum also per task and the sampler's).

        Raises:
            InvalidArgument: An episode option in oat's args is out of range (``max_turns``, ``max_total_tokens``,
                ``num_env``, ``system_prompt``); checked on the first call.
            UnknownEnvError: ``env_id`` is not registered (naming the closest ids).
            TaskError: The ``curriculum`` spec is malformed.
            BosTokenError: oat needs the tokenizer's bos in every prompt and the chat template cannot be made to write it.
        """
        args = self.args
        curriculum = getattr(args, "curriculum", None)
        if self._gem_sampler is None:  # without a curriculum: env_id's seeds in order (a sampler of one task)
            check_episode_options("GemArgsMixin", max_turns=getattr(args, "max_turns", None), system_prompt=getattr(args, "system_prompt", None),
                                  max_total_tokens=getattr(args, "max_total_tokens", None), num_env=getattr(args, "num_env", 16))  # 0: drew nothing, forever
            env_spec(args.env_id)  # unknown ids fail on the first call with the closest ids
            spec = sampler_spec(curriculum) if curriculum else {"tasks": [args.env_id], "weighting": "uniform"}
            self._gem_sampler = self._actor_sampler(spec, int(getattr(self, "actor_id", 0) or 0))
        if self._gem_tokenizer is None:  # start-up: oat's generate asserts the bos is in every prompt
            self._gem_tokenizer = tokenizer_writing_bos(self.tokenizer, getattr(args, "system_prompt", None))
        tokenizer = self._gem_tokenizer
        policy = ActorPolicy(self.generate, self.sampling_params, tokenizer)
        sampling = SamplingParams(
            max_new_tokens=int(self.sampling_params.max_tokens),
            temperature=float(self.sampling_params.temperature),
            top_p=float(getattr(self.sampling_params, "top_p", 1.0)),
        )
        episodes: list[list[Any]] = []
        trajectories = []
        wanted = int(args.rollout_batch_size_per_device)
        template = ChatTemplate.for_tokenizer(tokenizer, system_prompt=getattr(args, "system_prompt", None))  # probed once
        options = EpisodeOptions(max_turns=getattr(args, "max_turns", None), max_total_tokens=getattr(args, "max_total_tokens", None),
                                 history=getattr(args, "history", "as_sampled"))
        session_kwargs: dict[str, Any] = dict(options=options, chat_template=template)

        while sum(len(e) for e in episodes) < wanted:
            starts = self._gem_sampler.draw(int(getattr(args, "num_env", 16)))
            batch = asyncio.run(run_labels(starts, policy, tokenizer, sampling=sampling, **session_kwargs))
            record_outcomes(self._gem_sampler, [episode_outcome(start, t) for start, t in zip(starts, batch, strict=True)])
            for start, trajectory in zip(starts, batch, strict=True):
                tag_task(trajectory, start, self._gem_sampler.task_of(start).name)
                if trajectory.num_turns:
                    trajectories.append(trajectory)
                    episodes.append(oat_transitions(trajectory, tokenizer))
        # oat's step averages these into every transition's info, which its learner logs.
        metrics = {"actor/num_episodes": len(episodes), **trajectory_metrics(trajectories, prefix="actor/gem/")}
        if curriculum:
            metrics.update({**task_metrics(trajectories, prefix="actor/gem/task/"), **self._gem_sampler.metrics("actor/gem/curriculum/")})
        if self._gem_state_dir:
            save_sampler_state(self._gem_sampler, self._gem_state_dir)
        return episodes, metrics

    def _actor_sampler(self, spec: dict[str, Any], actor: int) -> Any:
        """This actor's own sampler: the spec's seed plus the actor id; its episode seeds from ``actor * 10**9``,
        so actors never replay each other's episodes."""
        state_dir = spec.pop("state_dir", None)
        spec.update(seed=int(spec.get("seed", 0)) + actor, seed_start=int(spec.get("seed_start", 0)) + actor * 10**9)
        sampler = sampler_from_spec(spec)
        if state_dir:
            self._gem_state_dir = os.path.join(state_dir, f"actor{actor}")
            load_sampler_state(sampler, self._gem_state_dir)
        return sampler


def actor_class(base: type | None = None) -> type:
    """``GemActor``: ``base`` (default: oat's ``PPOMultiTurnActor``) with :class:`GemCollector`'s ``collect_experience``."""
    if base is None:
        check_oat_version()
        from oat.algorithms.ppo_multiturn import PPOMultiTurnActor

        base = PPOMultiTurnActor
    return type("GemActor", (GemCollector, base), {"__doc__": "oat's multi-turn actor playing GEM envs."})


class _EnvPrompts(Sequence):
    """``length`` empty prompt rows, none stored: oat's loop needs a dataset to iterate, the env gives the prompts."""

    def __init__(self, length: int):
        self._length = length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> tuple[str, str, str]:  # type: ignore[override]  # oat reads rows by index only, never by slice
        if not -self._length <= index < self._length:
            raise IndexError(index)
        return ("", "", "")


def learner_class(base: type | None = None) -> type:
    """``GemLearner``: oat's ``PPOMultiTurnLearner`` fed by the env instead of a prompt dataset.

    oat's run loop iterates a prompt dataloader and hands each batch to ``actor.step``, which the
    multi-turn actor ignores. The dataset has ``max_train`` rows (oat's budget of prompts, which also
    sets its learning-rate schedule), each an empty prompt that is never stored.
    """
    if base is None:
        check_oat_version()
        from oat.algorithms.ppo_multiturn import PPOMultiTurnLearner

        base = PPOMultiTurnLearner

    def prepare_data(self, strategy: Any, tokenizer: Any) -> None:
        from torch.utils.data import DataLoader

        args = strategy.args
        self.prompts_dataset = _EnvPrompts(max(int(args.max_train), int(args.rollout_batch_size)))
        self.eval_prompts_dataset = _EnvPrompts(1)
        self.prompts_dataloader = strategy.setup_dataloader(
            self.prompts_dataset, args.rollout_batch_size_per_device, pin_memory=True, shuffle=False
        )
        self.eval_prompts_dataloader = DataLoader(self.eval_prompts_dataset, batch_size=1)

    def evaluate(self, dataloader: Any, steps: int) -> dict[str, Any]:
        return {}  # evaluate GEM envs with `gem eval` on saved checkpoints

    return type("GemLearner", (base,), {"prepare_data": prepare_data, "evaluate": evaluate})


if TYPE_CHECKING:  # built on first access by __getattr__ below (it imports oat); declared for readers and type checkers
    GemActor: type
    """oat's ``PPOMultiTurnActor`` playing GEM envs: :func:`actor_class` with its defaults."""
    GemLearner: type
    """oat's ``PPOMultiTurnLearner`` fed by the env: :func:`learner_class` with its defaults."""


def __getattr__(name: str) -> Any:
    if name == "GemActor":
        return actor_class()
    if name == "GemLearner":
        return learner_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
