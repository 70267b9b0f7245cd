"""Agent programs as an episode source for drive mode: the adapter's policy answers, the program plays.

An adapter that drives episodes with a :class:`~gem_core.rollout.policy.Policy` (TRL's ``rollout_func``,
verl's agent loop, oat's actor) plays env episodes with :func:`~gem_core.rollout.runner.run_labels`. An
agent program owns its loop instead, so here the same policy is put behind an
:class:`~gem_core.agent.endpoint.AgentEndpoint` and the program is run once per task
(:meth:`AgentProgram.run <gem_core.agent.program.AgentProgram.run>`): what comes back is the same
:class:`~gem_core.rollout.trajectory.TokenTrajectory` the adapters already turn into batches, with the
grader's reward on the last sampled token.

- :func:`run_agent_programs`: every run in full (one trajectory per branch, forks declared).
- :func:`run_agent_episodes`: one trajectory per task (:func:`episode_trajectory`), for frameworks that
  take one sample per prompt.

Every run of a batch has a thread of its own, so all of them are in flight at once: a batching policy
(``num_episodes``) waits for every live episode before it samples a round, so a run held back by a
bounded pool would stall the batch. Each run tells the policy when its program is gone, before grading,
so a slow grader holds no round: ``episode_finished``, and ``release_context`` with each branch's ids (a
backend that keeps attention states between turns frees them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gem_core.agent.endpoint import AgentEndpoint, AgentEndpointConfig
from gem_core.agent.episode import AgentEpisode
from gem_core.agent.program import AgentProgram, AgentRun
from gem_core.errors import GemError
from gem_core.protocols import Tokenizer
from gem_core.rollout.policy import Policy
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["episode_trajectory", "run_agent_episodes", "run_agent_programs"]


async def run_agent_programs(
    program: AgentProgram, policy: Policy, tokenizer: Tokenizer, tasks: Sequence[Any], *, config: AgentEndpointConfig | None = None,
    max_response_tokens: int | None = None,
) -> list[AgentRun]:
    """Run ``program`` once per task, all at once, against one endpoint that ``policy`` answers.

    Args:
        program: the agent program, its limits, setup and grader.
        policy: samples every call of every run, on the endpoint's own event loop (so a policy that
            batches, e.g. with ``num_episodes=len(tasks)``, batches the runs' calls).
        tokenizer: the policy's tokenizer, with its chat template.
        tasks: one per run; each is handed to the program's command, setup and grader.
        config: the endpoint's limits; pass ``AgentEndpointConfig(sampling=...)`` to train, so the
            trainer's temperature and token budget win over the agent's request.
        max_response_tokens: the trainer's completion length: lowers the program's own
            ``max_response_tokens`` (a branch's response never holds more; None: the program's).

    Returns:
        The runs in ``tasks`` order.

    Raises:
        Exception: the first error a run raised (its setup or grader failed), once every run has ended.

    Cancelled (Ctrl-C under ``asyncio.run``), it ends every open episode first: each run's program and the processes
    it started are killed within a poll, a run still in its setup never starts its program, and no grader runs; the
    interpreter does not wait out the time limits (only a setup still running, in its thread).
    """
    if max_response_tokens is not None:
        own = program.max_response_tokens
        program = dataclasses.replace(program, max_response_tokens=max_response_tokens if own is None else min(own, max_response_tokens))
    finished = getattr(policy, "episode_finished", None)
    release = getattr(policy, "release_context", None)
    endpoint = AgentEndpoint(policy, tokenizer, config or AgentEndpointConfig())
    await asyncio.to_thread(endpoint.start)
    cancelled = threading.Event()

    def play(task: Any) -> AgentRun:
        told = threading.Event()

        def tell_policy(episode: AgentEpisode | None = None) -> None:  # once per run, however it ends (a setup that raised too)
            if told.is_set():
                return
            told.set()

            def on_loop() -> None:  # the policy lives on the endpoint's loop
                if callable(release) and episode is not None:  # a backend that kept the branches' states frees them
                    for branch in episode.branches:
                        release(branch.ids())
                if callable(finished):
                    finished()

            endpoint._on_loop(on_loop)

        def exited(episode: AgentEpisode) -> None:
            tell_policy(episode)
            if cancelled.is_set():  # nobody waits for this run's grade
                raise GemError(f"the run of task {task!r} was cancelled")

        try:
            if cancelled.is_set():  # a thread that started after the cancel (the pool had not run it yet)
                raise GemError(f"the run of task {task!r} was cancelled before it started")
            return program.run(endpoint, task, on_exit=exited)
        finally:
            tell_policy()

    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=max(1, len(tasks)), thread_name_prefix="gem-agent-run")
    try:
        results = await asyncio.gather(*(loop.run_in_executor(pool, play, task) for task in tasks), return_exceptions=True)
    except BaseException:
        cancelled.set()
        # Each run's _wait sees its episode ended and kills its program; a run still in its setup finds its episode
        # ended after it, or none to open, and never starts its program (which would run to its time limit).
        await asyncio.to_thread(endpoint._end_every_episode, "the run was cancelled")
        raise
    finally:
        pool.shutdown(wait=False)
        await asyncio.to_thread(endpoint.stop)
    runs: list[AgentRun] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        runs.append(result)
    return runs


def episode_trajectory(run: AgentRun, tokenizer: Tokenizer) -> TokenTrajectory:
    """The one trajectory of ``run`` for a framework that takes one sample per task: the branch of its last call.

    That branch carries the grader's reward. Other branches (the agent rewrote its history) are left out,
    and counted in ``metrics["agent_dropped_branches"]``; :func:`run_agent_programs` keeps them all. A run
    that made no call gives a trajectory of no turns whose prompt is the task's text in the chat template
    (nothing to train on, but its row exists). The metrics also hold ``agent_reward``, ``agent_exit_code``,
    ``agent_ended`` and ``agent_seconds``; the grader's :attr:`~gem_core.agent.program.AgentRun.info` joins the
    last turn's info (its ``success`` is then the episode's verdict).
    """
    if run.trajectories:
        trajectory = run.trajectories[run.episode.calls[-1].branch]
        if trajectory.infos and run.info:
            trajectory.infos[-1] = {**trajectory.infos[-1], **run.info}
    else:
        text = tokenizer.apply_chat_template([{"role": "user", "content": run.setup.prompt or ""}], tokenize=False, add_generation_prompt=True)
        trajectory = TokenTrajectory(
            prompt_ids=tokenizer.encode(text, add_special_tokens=False), response_ids=[], loss_mask=[], logprobs=[], turn_spans=[],
            rewards=[], terminated=not run.truncated, truncated=run.truncated,
        )
    trajectory.env_id = trajectory.env_id or getattr(run.task, "env_id", None)
    trajectory.seed = trajectory.seed if trajectory.seed is not None else getattr(run.task, "seed", None)
    trajectory.metrics.update(
        agent_reward=run.reward, agent_exit_code=run.exit_code, agent_ended=run.ended, agent_seconds=round(run.seconds, 3),
        agent_dropped_branches=max(0, len(run.trajectories) - 1),
    )
    return trajectory


async def run_agent_episodes(
    program: AgentProgram, policy: Policy, tokenizer: Tokenizer, tasks: Sequence[Any], *, config: AgentEndpointConfig | None = None,
    max_response_tokens: int | None = None,
) -> list[TokenTrajectory]:
    """:func:`run_agent_programs`, then :func:`episode_trajectory` of each run: one trajectory per task, in order."""
    runs = await run_agent_programs(program, policy, tokenizer, tasks, config=config, max_response_tokens=max_response_tokens)
    return [episode_trajectory(run, tokenizer) for run in runs]
