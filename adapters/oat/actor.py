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

Every actor returns the same metric keys on every step, sorted: oat's learner all-reduces them key by key in
dict order, so a key one actor lacks would average another key's values under it (and put the collectives out
of step). ``actor/gem/*`` and ``actor/num_episodes`` count every episode played, those with no turns (a first
prompt that filled ``max_total_tokens``: nothing to train on) too, and ``actor/gem/dropped_episodes`` counts those.

Curriculum (``--curriculum '<sampler spec JSON>'``, :mod:`gem_core.curriculum`): oat's multi-turn actor
chooses its own episodes (``collect_experience``), so each actor keeps a task sampler: it draws the starts
of every batch of ``num_env`` episodes, is updated with their outcomes, and its metrics
(``actor/gem/task/<task>/...``, ``actor/gem/curriculum/<task>/...``) join what ``collect_experience`` returns,
which oat logs. They hold every task of the spec on every step: a task the actor did not draw in the batch
logs 0 episodes and 0.0 for its success and return (NaN would turn the learners' mean into NaN), so a task's
rate averaged over actors counts those zeros. Actors do not share one: each draws with its own seed and hands
out its own seeds, offset by its global index (oat numbers actors per node: ``group_rank`` times the node's
actors, plus ``actor_id``). What oat leaves no hook for: the actor's state is not in oat's checkpoints, so with
``state_dir`` in the spec each actor writes ``state_dir/actor<index>/gem_task_sampler.json`` after every
collection and reads it back when it starts. The actor holds that folder's lock from its first collection
until :meth:`GemCollector.release_state_dir` or its process ends, so a second run given the same
``state_dir`` is refused naming the owner's pid.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

from gem_adapters.framework_version import FrameworkVersionError, SupportedVersions
from gem_adapters.oat.policy import ActorPolicy
from gem_adapters.oat.transitions import NO_TURNS_MESSAGE, oat_transitions
from gem_core.curriculum import (
    TaskError,
    episode_outcome,
    load_sampler_state,
    metric_name,
    record_outcomes,
    sampler_from_spec,
    sampler_spec,
    save_sampler_state,
    tag_task,
    task_metrics,
)
from gem_core.curriculum.groups import LOCK_FILE
from gem_core.errors import GemError, InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.registry import spec as env_spec
from gem_core.rollout import ChatTemplate, EpisodeOptions, SamplingParams, run_labels, trajectory_metrics
from gem_core.rollout.options import check_episode_options
from gem_core.transport.folder_lock import lock_folder
from gem_core.vector.calls import check_count

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
    _gem_lock: int | None = None

    def collect_experience(self) -> tuple[list[list[Any]], dict[str, Any]]:
        """Run episodes until ``rollout_batch_size_per_device`` transitions are collected; all finished.

        Returns:
            ``(episodes, metrics)``: each episode's oat transitions (episodes with no turns have none and are left
            out), and the batch's ``actor/gem/*`` metrics (with a curriculum also per task and the sampler's): the
            same keys in the same order on every actor and every step.

        Raises:
            InvalidArgument: An episode option in oat's args is out of range (``max_turns``, ``max_total_tokens``,
                ``num_env``, ``system_prompt``, ``generate_max_length``), checked on the first call; or every episode
                of a batch had no turns (``max_total_tokens`` below the env's first prompt), which no batch could fill.
            UnknownEnvError: ``env_id`` is not registered (naming the closest ids).
            TaskError: The ``curriculum`` spec is malformed (``seed``/``seed_start`` not whole numbers from 0), or
                its ``state_dir`` cannot be written or is in use by another run (naming the owner's pid); checked
                before anything is sampled.
            BosTokenError: oat needs the tokenizer's bos in every prompt and the chat template cannot be made to write it.
        """
        args = self.args
        curriculum = getattr(args, "curriculum", None)
        # oat's --generate_max_length: 0 would play turns that sample nothing, None has no number for the runner
        max_new_tokens = check_count("--generate_max_length (the actor's sampling_params.max_tokens)",
                                     self.sampling_params.max_tokens, most=2**31 - 1)
        if self._gem_sampler is None:  # without a curriculum: env_id's seeds in order (a sampler of one task)
            check_episode_options("GemArgsMixin", max_turns=getattr(args, "max_turns", None), system_prompt=getattr(args, "system_prompt", None),
                                  max_total_tokens=getattr(args, "max_total_tokens", None), num_env=getattr(args, "num_env", 16))  # 0: drew nothing, forever
            env_spec(args.env_id)  # unknown ids fail on the first call with the closest ids
            spec = sampler_spec(curriculum) if curriculum else {"tasks": [args.env_id], "weighting": "uniform"}
            self._gem_sampler = self._actor_sampler(spec, _global_actor_index(args, getattr(self, "actor_id", 0)))
        if self._gem_tokenizer is None:  # start-up: oat's generate asserts the bos is in every prompt
            self._gem_tokenizer = tokenizer_writing_bos(self.tokenizer, getattr(args, "system_prompt", None))
        tokenizer = self._gem_tokenizer
        policy = ActorPolicy(self.generate, self.sampling_params, tokenizer)
        sampling = SamplingParams(
            max_new_tokens=max_new_tokens,
            temperature=float(self.sampling_params.temperature),
            top_p=float(getattr(self.sampling_params, "top_p", 1.0)),
        )
        episodes: list[list[Any]] = []
        played = []  # every episode, those with no turns too: the metrics' denominators
        wanted = int(args.rollout_batch_size_per_device)
        template = ChatTemplate.for_tokenizer(tokenizer, system_prompt=getattr(args, "system_prompt", None))  # probed once
        options = EpisodeOptions(max_turns=getattr(args, "max_turns", None), max_total_tokens=getattr(args, "max_total_tokens", None),
                                 history=getattr(args, "history", "as_sampled"))
        session_kwargs: dict[str, Any] = dict(options=options, chat_template=template)

        while sum(len(e) for e in episodes) < wanted:
            starts = self._gem_sampler.draw(int(getattr(args, "num_env", 16)))
            batch = asyncio.run(run_labels(starts, policy, tokenizer, sampling=sampling, **session_kwargs))
            if not any(trajectory.num_turns for trajectory in batch):  # else the next batch would be the same, forever
                tasks = sorted({self._gem_sampler.task_of(start).name for start in starts})
                raise InvalidArgument(f"{NO_TURNS_MESSAGE} Every one of the {len(batch)} episodes of a batch had none (max_total_tokens="
                                      f"{options.max_total_tokens}; tasks: {', '.join(tasks)}), so the actor could never collect its batch.")
            record_outcomes(self._gem_sampler, [episode_outcome(start, t) for start, t in zip(starts, batch, strict=True)])
            for start, trajectory in zip(starts, batch, strict=True):
                tag_task(trajectory, start, self._gem_sampler.task_of(start).name)
                played.append(trajectory)
                if trajectory.num_turns:
                    episodes.append(oat_transitions(trajectory, tokenizer))
        if self._gem_state_dir:
            save_sampler_state(self._gem_sampler, self._gem_state_dir)
        return episodes, self._batch_metrics(played, len(played) - len(episodes), curriculum=bool(curriculum))

    def release_state_dir(self) -> None:
        """Give up the curriculum's ``state_dir/actor<index>`` (release its lock) so another run may use it; this
        actor no longer saves its sampler there. Harmless without ``state_dir`` or when called again."""
        lock, self._gem_lock, self._gem_state_dir = self._gem_lock, None, None
        if lock is not None:
            os.close(lock)  # closing the descriptor releases its flock

    def _batch_metrics(self, played: list[Any], dropped: int, *, curriculum: bool) -> dict[str, Any]:
        """The batch's metrics, every key on every step in sorted order: oat's learners all-reduce them key by key."""
        # oat's step averages these into every transition's info, which its learner logs.
        metrics = {"actor/num_episodes": len(played), "actor/gem/dropped_episodes": float(dropped),
                   **trajectory_metrics(played, prefix="actor/gem/")}
        if curriculum:
            metrics.update({**task_metrics(played, prefix="actor/gem/task/"), **self._gem_sampler.metrics("actor/gem/curriculum/")})
            for task in self._gem_sampler.tasks:  # a task not drawn (or not yet measured): 0, never NaN, in a mean
                name = metric_name(task.name)
                for key in ("task/{}/success", "task/{}/return", "task/{}/episodes", "curriculum/{}/success"):
                    metrics.setdefault("actor/gem/" + key.format(name), 0.0)
        return dict(sorted(metrics.items()))

    def _actor_sampler(self, spec: dict[str, Any], actor: int) -> Any:
        """This actor's own sampler: the spec's seed plus the actor's global index; its episode seeds from
        ``actor * 10**9``, so actors never replay each other's episodes. With ``state_dir``, its own folder in
        it, locked, is probed before anything is sampled."""
        state_dir = spec.pop("state_dir", None)
        for key in ("seed", "seed_start"):  # checked before the offset is added (a negative one would pass after it)
            value = spec.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TaskError(f"{key} must be an integer of at least 0, got {value!r:.80}.")
        spec.update(seed=spec.get("seed", 0) + actor, seed_start=spec.get("seed_start", 0) + actor * 10**9)
        sampler = sampler_from_spec(spec)
        if state_dir:
            if not isinstance(state_dir, (str, os.PathLike)):
                raise TaskError(f"'state_dir' must be a folder path, got {state_dir!r:.80}.")
            if os.path.exists(state_dir) and not os.path.isdir(state_dir):
                raise TaskError(f"state_dir {state_dir} is a file, not a folder: give a folder (created if missing).")
            folder = os.path.join(os.fspath(state_dir), f"actor{actor}")
            self._gem_lock = lock_folder(Path(folder), LOCK_FILE, what="state_dir", error=TaskError,
                                         why="two runs sharing it overwrite each other's sampler state")
            self._gem_state_dir = folder
            try:
                load_sampler_state(sampler, folder)
            except BaseException:
                self.release_state_dir()
                raise
        return sampler


def _global_actor_index(args: Any, actor_id: int) -> int:
    """The actor's index among every node's actors: oat numbers them per node (``actor.init(i, ...)`` for the
    node's ``i``-th), so without the node's place two nodes' actors would play the same seeds and draws.

    A node (``--group_rank`` of ``--num_groups``) runs one actor per ``--num_gpus_per_actor`` of its actor GPUs:
    all ``--gpus`` with ``--collocate``, else the first half (rounded up), as oat's ``get_program`` lays them out.
    """
    actor_id = int(actor_id or 0)
    gpus = int(getattr(args, "gpus", 1) or 1)
    actor_gpus = gpus if getattr(args, "collocate", False) else (gpus + 1) // 2
    per_group = actor_gpus // int(getattr(args, "num_gpus_per_actor", 1) or 1)
    return int(getattr(args, "group_rank", 0) or 0) * per_group + actor_id


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
