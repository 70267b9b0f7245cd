"""``rollout_func`` for TRL's ``GRPOTrainer``: one GEM episode per prompt, token-exact.

TRL calls ``rollout_func(prompts, trainer)`` with the batch's prompts (each repeated
``num_generations`` times) and trains on what it returns. Each returned completion is the whole
episode after the prompt: the sampled action tokens (``env_mask`` 1, so they get the gradient) and the
environment's observation tokens (``env_mask`` 0). Everything else returned reaches TRL's reward
functions as keyword arguments: ``env_return``, ``turn_rewards``, ``turn_spans``, ``num_turns``,
``success``, ``env_error_turns``, ``truncated`` and the trajectories themselves (``gem_trajectory``);
:func:`env_return_reward` is the reward function to pass. The rollout logs the episodes' statistics (per task too)
beside TRL's metrics, weighted by episode over TRL's logging window.

With ``GemRolloutFunc(task_sampler=TaskSampler(...))`` the episode starts of training batches come from a
:class:`~gem_core.curriculum.TaskSampler` (one draw per GRPO group, shared by all its copies) instead of the
prompts' labels, and every finished episode updates it; :class:`~gem_adapters.trl.TaskSamplerCallback`
keeps its state in each checkpoint.

Vision envs (``vision:*``) train a VLM with its processor as ``processing_class`` and a dataset from
:func:`~gem_adapters.trl.make_dataset`, which then has an ``images`` column: TRL's real VLM path turns
those into ``pixel_values``/``image_grid_thw`` for the loss, and the episode's prompt ids hold exactly
the processor's placeholders for them (the prompt is the env's first observation with its images).
Images shown after the first turn are refused with an error (TRL takes images only for the prompt).

An agent program (:mod:`gem_core.agent`) instead of the env loop: ``GemRolloutFunc(agent=AgentProgram(...))``
runs the program once per prompt, its task the prompt's label, against an endpoint the trainer's policy
answers (:func:`~gem_core.agent.episodes.run_agent_episodes`, with the trainer's temperature, top-p, top-k and
``max_new_tokens`` over the agent's, ``max_completion_length`` as its response budget); the completion is the
branch of the program's last call, the grader's reward on its last sampled token (e.g. :func:`~gem_core.agent.swe.swe_agent_program` on ``swe:*`` rows).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gem_adapters.framework_version import check_trl_version
from gem_adapters.trl.make_dataset import episode_label
from gem_adapters.trl.policy import trainer_policy
from gem_adapters.trl.sampled_head import score_sampled_tokens_only
from gem_core.curriculum import TaskSampler, episode_outcome, group_starts, record_outcomes, tag_task, task_metrics
from gem_core.errors import InvalidArgument, InvalidArgumentType, refuse_unknown_keywords
from gem_core.rollout import EpisodeOptions, SamplingParams, TokenTrajectory, run_labels
from gem_core.rollout.metrics import trajectory_metrics
from gem_core.rollout.options import check_episode_options
from gem_core.rollout.vision import require_prompt_images_only, text_tokenizer
from gem_core.transport.sync_bridge import run_sync

if TYPE_CHECKING:
    from gem_core.agent.program import AgentProgram

__all__ = ["GemRolloutFunc", "env_return_reward", "trajectories_to_rollout"]


@dataclass
class GemRolloutFunc:
    """A ``trl.trainer.grpo_trainer.RolloutFunc`` that plays GEM episodes with the trainer's model.

    Pass an instance as ``GRPOTrainer(..., rollout_func=GemRolloutFunc(max_turns=...))`` with a dataset
    from :func:`gem_adapters.trl.make_dataset`. Sampling temperature, top-p and top-k come from the
    trainer's ``GRPOConfig``, and without vLLM its ``repetition_penalty``, ``min_p`` and ``generation_kwargs`` too (with
    vLLM, TRL's vLLM generation applies them); the episode's completion (all turns, env tokens included) is capped at
    ``GRPOConfig.max_completion_length`` tokens. Options are checked whenever they are set, at construction or after.

    Each call logs the episodes' statistics beside TRL's metrics (``gem/turns``, ``gem/success``, ``gem/truncated``,
    ``gem/env_error_rate``, ...: the core's :func:`~gem_core.rollout.metrics.trajectory_metrics`; per task, by env id
    and level kwargs, ``gem/task/<task>/success``, ``/return`` and ``/episodes``: :func:`~gem_core.curriculum.task_metrics`;
    with a task sampler its next-draw probability and recent success per task, ``gem/curriculum/<task>/...``). Rates
    and means are over the episodes of TRL's logging window (all processes), however its batches split them;
    ``gem/episodes``, ``gem/env_error_turns`` and ``/episodes`` are the window's totals. An env that fails shows
    there instead of training on silent zero rewards.

    Raises:
        TRLVersionError: The installed TRL is not a supported version (the message gives the install line).
        InvalidArgument: ``max_turns`` or ``max_new_tokens`` is out of range, ``logprobs`` or ``score_env_tokens`` is
            not a bool, or ``task_sampler`` has vision tasks (at construction, or when the option is assigned).
        InvalidArgumentType: ``task_sampler`` is not a ``TaskSampler``, ``agent`` not an ``AgentProgram``, or a keyword is
            not an option (naming the closest), such as the output ``last_trajectories``.
    """

    max_turns: int | None = None
    """Turn cap on top of the env's own limit (the episode is truncated there)."""
    max_new_tokens: int | None = 256
    """Most tokens sampled in one turn (the core's name, :attr:`gem_core.rollout.SamplingParams.max_new_tokens`);
    None: what is left of ``max_completion_length``."""
    last_trajectories: list[TokenTrajectory] = field(default_factory=list, init=False, repr=False)
    """The trajectories of the most recent call, for logging and inspection (an output: not an option)."""
    logprobs: bool | None = None
    """Record the sampled tokens' log-probabilities (``logprobs`` of the rollout dict, the trajectories'
    ``logprobs``). None: only where TRL uses them, i.e. with ``GRPOConfig.off_policy_mask_threshold`` (with
    vLLM they come from vLLM either way); TRL recomputes them for its loss, and without them the rollout
    returns ``logprobs=None``, as TRL's own generation does without vLLM."""
    score_env_tokens: bool = False
    """Project the env's observation tokens through the LM head in TRL's loss, as TRL does for any masked
    completion token. False (the default) keeps them out (:mod:`gem_adapters.trl.sampled_head`): the same
    loss and gradient for less work, as those positions' log-probs are masked out of every use."""
    task_sampler: TaskSampler | None = None
    """Where training episodes start (:mod:`gem_core.curriculum`): one draw per GRPO group, given to all its
    ``num_generations`` copies, instead of the prompt's label (the prompt then gives only the system prompt);
    each finished training episode updates it with its success and return. Evaluation batches keep their
    dataset's episodes and leave it alone. None: every episode is its prompt's label."""
    agent: AgentProgram | None = None
    """Play each prompt's episode with this agent program (:mod:`gem_core.agent`) instead of the env loop: the
    prompt's label is its task, the trainer's policy answers its calls, its grader gives the reward. The
    program's own ``max_turns`` and ``time_limit`` bound it (``max_turns`` here and the system prompt are the
    env loop's); with the endpoint's ``serve`` extra (starlette, uvicorn). None: the env loop."""

    def __new__(cls, *args: Any, **kwargs: Any) -> GemRolloutFunc:
        refuse_unknown_keywords(cls, kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        check_trl_version()  # a wrong TRL install fails here with the install line (reads metadata only; no import of trl)

    def __setattr__(self, name: str, value: Any) -> None:
        # Each option is checked when set, by the constructor or later: `rollout.max_new_tokens = 0` played empty
        # moves in silence, and `rollout.logprobs = "no"` read as True.
        check = _OPTION_CHECKS.get(name)
        if check is not None:
            check(value)
        super().__setattr__(name, value)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Play one episode per prompt with the trainer's model; TRL calls this once per generation batch.

        The episodes run concurrently (their turns batched by the trainer's generation backend); the
        trajectories stay in :attr:`last_trajectories` until the next call.

        Args:
            prompts: The batch's prompts from :func:`~gem_adapters.trl.make_dataset` (each repeated
                ``num_generations`` times); the ``gem`` label on each prompt's last message fixes its episode.
            trainer: The ``GRPOTrainer`` calling; its ``GRPOConfig`` gives the sampling settings and
                ``max_completion_length``, its model (or vLLM) samples the actions.

        Returns:
            TRL's rollout dict (:func:`trajectories_to_rollout`): ``prompt_ids``, ``completion_ids``,
            ``logprobs`` and ``env_mask`` per episode, plus the per-episode columns TRL passes to reward
            functions (``env_return``, ``turn_rewards``, ``gem_trajectory``, ...) and, with a ``task_sampler``
            while training, ``gem_curriculum``.

        Raises:
            InvalidArgument: A prompt is not a message list or its last message has no ``gem`` key (the
                dataset was not made by ``make_dataset``), a vision env showed an image after its first turn, the
                ``task_sampler``'s ``group_size`` (``"band"`` weighting) is not the trainer's ``num_generations``, or
                without vLLM ``GRPOConfig.generation_kwargs`` sets what the rollout sets per turn (e.g. ``max_new_tokens``).
            LabelError: A prompt's ``gem`` label is not valid JSON, lacks ``env_id`` or ``seed``, or names an
                unknown env.
        """
        # A vision model's processor plays vision envs (its tokenizer does the text).
        processing_class = trainer.processing_class
        tokenizer = text_tokenizer(processing_class)
        args = trainer.args
        sampling = SamplingParams(
            # None: a turn may use what is left of the completion budget (the episode's max_response_tokens)
            max_new_tokens=self.max_new_tokens if self.max_new_tokens is not None else int(args.max_completion_length),
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=max(args.top_k or 0, 0),  # None, 0 and vLLM's -1 all mean off
        )
        episodes = [episode_label(p) for p in prompts]
        sampler = self.task_sampler if self.task_sampler is not None and trainer.model.training else None  # the curriculum trains only
        if sampler is not None:  # one draw per GRPO group of the global batch (TRL gives a group's copies consecutively)
            _check_group_size(sampler, int(trainer.num_generations))
            rank, world = _process_slot(trainer)
            starts = group_starts(sampler, episodes, int(trainer.num_generations), rank=rank, world=world)
            episodes = [(start, system) for start, (_, system) in zip(starts, episodes, strict=True)]
        want_logprobs = self.logprobs if self.logprobs is not None else getattr(args, "off_policy_mask_threshold", None) is not None
        policy = trainer_policy(trainer, len(prompts), logprobs=want_logprobs)
        template_kwargs = dict(getattr(args, "chat_template_kwargs", None) or {})

        async def play_all() -> list[TokenTrajectory]:
            # Every episode of the batch is in flight at once: the policy batches their turns (and
            # the vLLM batcher waits for all live episodes, so none may be held back).
            if self.agent is not None:
                from gem_core.agent import AgentEndpointConfig, run_agent_episodes

                config = AgentEndpointConfig(sampling=sampling, chat_template_kwargs=template_kwargs)
                trajectories = await run_agent_episodes(
                    self.agent, policy, tokenizer, [label for label, _ in episodes], config=config,
                    max_response_tokens=args.max_completion_length,
                )
            else:
                trajectories = await run_labels(
                    [label for label, _ in episodes], policy, processing_class, system_prompts=[system for _, system in episodes],
                    sampling=sampling, options=EpisodeOptions(
                        chat_template_kwargs=template_kwargs, max_turns=self.max_turns, max_response_tokens=args.max_completion_length,
                    ),
                )
            if hasattr(policy, "drain"):
                policy.drain()  # vLLM: stay in step with ranks whose episodes are still running
            return trajectories

        self.last_trajectories = run_sync(play_all)
        for (label, _), trajectory in zip(episodes, self.last_trajectories, strict=True):
            tag_task(trajectory, label, sampler.task_of(label).name if sampler is not None else None)
        if sampler is not None:  # every process updates its copy of the sampler with the whole batch, in global order
            outcomes = [episode_outcome(t.metrics["task"], t) for t in self.last_trajectories]
            if _process_slot(trainer)[1] > 1:
                from accelerate.utils import gather_object

                outcomes = gather_object(outcomes)
            record_outcomes(sampler, outcomes)
        newline = tokenizer.encode("\n", add_special_tokens=False)
        eos_ids = getattr(trainer, "eos_token_ids", None)  # TRL's: the tokenizer's eos and every eos of the model's generation_config
        rollout = trajectories_to_rollout(
            self.last_trajectories, eos_token_id=tokenizer.eos_token_id, filler_token_id=newline[0] if newline else None,
            end_token_ids=None if eos_ids is None else [*eos_ids, tokenizer.pad_token_id],
        )
        head = None if self.score_env_tokens else score_sampled_tokens_only(trainer)
        if head is not None:
            head.register(rollout["completion_ids"], rollout["env_mask"])
        curriculum = sampler.metrics() if sampler is not None else {}
        if sampler is not None:
            rollout["gem_curriculum"] = curriculum  # not a list: TRL gives it to every row
        _log_episode_metrics(trainer, self.last_trajectories, curriculum)
        return rollout


def _check_switch(name: str, none: bool) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not isinstance(value, bool) and not (none and value is None):  # "no" or "False" would read as True
            raise InvalidArgument(f"GemRolloutFunc: {name}={value!r} must be True or False{', or None' if none else ''}.")

    return check


def _check_task_sampler(value: Any) -> None:
    if not isinstance(value, (TaskSampler, type(None))):
        raise InvalidArgumentType(f"GemRolloutFunc: task_sampler must be a gem_core.curriculum.TaskSampler (or None), got {type(value).__name__}.")
    vision = [task.name for task in (value.tasks if value is not None else ()) if task.env_id.startswith("vision:")]
    if vision:
        # TRL takes a prompt's images from its dataset row, which would not be the drawn episode's.
        raise InvalidArgument(f"task_sampler cannot draw vision tasks ({', '.join(vision)}): TRL shows the dataset row's images, "
                              "not the drawn episode's; train vision envs from make_dataset's rows (no task_sampler).")


def _check_agent(value: Any) -> None:
    if value is not None:
        from gem_core.agent.program import AgentProgram  # no server import: the endpoint's extra is needed only when it runs

        if not isinstance(value, AgentProgram):
            raise InvalidArgumentType(f"GemRolloutFunc: agent must be a gem_core.agent.AgentProgram (or None), got {type(value).__name__}.")


_OPTION_CHECKS: dict[str, Callable[[Any], None]] = {
    "max_turns": lambda value: check_episode_options("GemRolloutFunc", max_turns=value),
    "max_new_tokens": lambda value: check_episode_options("GemRolloutFunc", max_new_tokens=value),
    "logprobs": _check_switch("logprobs", none=True),
    "score_env_tokens": _check_switch("score_env_tokens", none=False),
    "task_sampler": _check_task_sampler,
    "agent": _check_agent,
}
"""The check of each option of :class:`GemRolloutFunc`, run whenever it is set."""


def _check_group_size(sampler: TaskSampler, num_generations: int) -> None:
    """Refuse a ``"band"`` sampler whose group is not the trainer's: it would weight tasks by the chance that a group
    of another size is informative (the other weightings do not read ``group_size``)."""
    if sampler.weighting == "band" and sampler.group_size != num_generations:
        raise InvalidArgument(
            f"GemRolloutFunc: task_sampler.group_size={sampler.group_size} but the trainer's GRPOConfig.num_generations="
            f"{num_generations}: the sampler's 'band' weighting scores a task by the chance that a group of group_size "
            f"episodes is informative, which must be the trainer's group; build it with TaskSampler(..., group_size={num_generations})."
        )


_WINDOW_TOTALS = frozenset({"episodes", "env_error_turns"})
"""The statistics (last part of the name) logged as totals over TRL's logging window; the rest are per-episode means."""


def _log_episode_metrics(trainer: Any, trajectories: list[TokenTrajectory], curriculum: dict[str, float]) -> None:
    """Log the batch's episode statistics into the trainer's metrics, weighted by episode over TRL's logging window.

    TRL's ``log_metric`` (what reward functions get) averages a batch's values, then the batches of a logging window
    unweighted: a task's rate would be the mean of its batch rates (two wins of two and none of four read 0.5, not
    2/6), a count the mean of batch counts. So each episode's values go into ``GRPOTrainer._metrics``, whose ``log``
    averages and clears each list once per window: one value per episode for a rate or mean, one running total for
    a count. Every process's episodes are gathered first. A stand-in trainer without TRL's metrics logs nothing.
    """
    store = getattr(trainer, "_metrics", None)
    if store is None:
        return
    episodes = [{**trajectory_metrics([t]), **task_metrics([t])} for t in trajectories]
    if _process_slot(trainer)[1] > 1:  # every process calls the rollout each batch, so this collective is safe
        from accelerate.utils import gather_object

        episodes = gather_object(episodes)
    metrics = store["train" if trainer.model.training else "eval"]
    for values in episodes:
        for name, value in values.items():
            if name.rpartition("/")[2] in _WINDOW_TOTALS:
                metrics[name][:] = [sum(metrics[name]) + value]
            else:
                metrics[name].append(value)
    for name, value in curriculum.items():  # the sampler's state, the same on every process: one value per batch
        metrics[name].append(value)


def _process_slot(trainer: Any) -> tuple[int, int]:
    """(this process's rank, the number of processes) of the trainer's accelerator."""
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None:
        return 0, 1
    return int(accelerator.process_index), int(accelerator.num_processes)


def trajectories_to_rollout(
    trajectories: list[TokenTrajectory], *, eos_token_id: int | None, filler_token_id: int | None = None,
    end_token_ids: Collection[int | None] | None = None,
) -> dict[str, Any]:
    """TRL's rollout dict from core trajectories (the translation, and nothing else).

    TRL counts a completion as truncated (``mask_truncated_completions``, ``completions/clipped_ratio``)
    exactly when its last id is not one of ``end_token_ids`` (the trainer's ``eos_token_ids`` and the pad id;
    None: ``eos_token_id`` alone). So an episode that ended normally gets a masked EOS if its last id is not
    one, and an episode GEM truncated (turn limit, token budget, env truncation) that happens to end in one
    gets one masked ``filler_token_id`` (a plain-text id) after it. An empty completion (an agent run killed
    before its first call) always gets its masked EOS or filler (the other, or 0, where that one is None),
    as TRL's step reads every completion's last id.
    ``logprobs`` is None when no trajectory has them (a policy that does not record them), as in TRL's
    own generation without vLLM; zeros in their place would read as probability-one samples. An episode without
    them among episodes with them (vLLM had no log-prob for a token of one of its turns) gets None for each of
    its tokens, which TRL reads as NaN and leaves out of its importance-sampling correction, as it does vLLM's own.

    Raises:
        InvalidArgument: An episode showed an image after its first turn (TRL takes images only with the prompt).
    """
    ends = {eos_token_id} if end_token_ids is None else set(end_token_ids)
    out: dict[str, Any] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask")}  # TRL's rollout dict
    for trajectory in trajectories:
        require_prompt_images_only(trajectory, "TRL's rollout_func path")
        completion = list(trajectory.response_ids)
        mask = list(trajectory.loss_mask)
        logprobs = list(trajectory.logprobs)
        ends_in_eos = bool(completion) and completion[-1] in ends
        if not completion or trajectory.truncated == ends_in_eos:
            extra = filler_token_id if trajectory.truncated else eos_token_id
            if extra is None and not completion:  # TRL's step reads every completion's last id
                extra = next((t for t in (eos_token_id, filler_token_id) if t is not None), 0)
            if extra is not None:
                completion.append(extra)
                mask.append(0)
                logprobs.append(0.0)
        out["prompt_ids"].append(list(trajectory.prompt_ids))
        out["completion_ids"].append(completion)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask)
    recorded = [t.metrics.get("has_logprobs", True) for t in trajectories]
    if trajectories and not any(recorded):
        out["logprobs"] = None
    elif not all(recorded):  # the turn's zeros would read as probability-one samples; TRL takes None as unknown
        out["logprobs"] = [lps if has else [None] * len(lps) for lps, has in zip(out["logprobs"], recorded, strict=True)]
    out["env_return"] = [t.episode_return for t in trajectories]
    out["turn_rewards"] = [list(t.rewards) for t in trajectories]
    out["turn_spans"] = [[list(span) for span in t.turn_spans] for t in trajectories]
    out["num_turns"] = [t.num_turns for t in trajectories]
    out["success"] = [bool(t.metrics.get("success", False)) for t in trajectories]
    out["truncated"] = [bool(t.truncated) for t in trajectories]
    out["env_error_turns"] = [int(t.metrics.get("env_error_turns", 0)) for t in trajectories]
    out["gem_trajectory"] = list(trajectories)  # for reward functions that read the whole episode
    return out


def env_return_reward(completions: list[Any], env_return: list[float] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: the episode return computed by the env (sum of its per-turn rewards).

    The episodes' statistics are logged by :class:`GemRolloutFunc` itself (see there), whatever the reward functions.

    Returns:
        One reward per completion: its episode's return.

    Raises:
        InvalidArgument: No ``env_return`` column: the rollout was not :class:`GemRolloutFunc`'s (e.g. TRL's own
            generation, or ``environment_factory``, which scores episodes itself).
    """
    if env_return is None:  # TRL gives reward functions only the rollout's own fields
        raise InvalidArgument("env_return_reward reads the episode returns that GemRolloutFunc returns: pass rollout_func=GemRolloutFunc(...) "
                         "to GRPOTrainer, or, with environment_factory, pass no reward_funcs (TRL then scores each episode with the env's get_reward()).")
    return [float(r) for r in env_return]
