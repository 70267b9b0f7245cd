"""Agent programs as trainable episodes: an OpenAI-compatible endpoint on loopback records their calls as tokens.

- :mod:`~gem_core.agent.episode`: :class:`AgentEpisode`, one episode's calls stitched into token trajectories
  (extended where the messages extend, forked where the agent rewrote its history).
- :mod:`~gem_core.agent.endpoint`: :class:`AgentEndpoint`, ``/v1/chat/completions`` and ``/v1/completions``
  answered by any :class:`~gem_core.rollout.policy.Policy`, episodes keyed by API key or URL path.
- :mod:`~gem_core.agent.program`: :class:`AgentProgram`, an agent program run as a subprocess against one
  task, with time and turn limits, a task setup and a grader's reward.
- :mod:`~gem_core.agent.episodes`: :func:`run_agent_programs` and :func:`run_agent_episodes`, agent programs as
  an episode source for drive mode (the adapter's policy behind the endpoint, token trajectories out).
- :mod:`~gem_core.agent.swe`: :func:`swe_agent_program`, an agent program on the SWE tasks, graded by their tests.

Needs the ``serve`` extra (starlette, uvicorn) for the endpoint.
"""

from gem_core.agent.endpoint import AgentEndpoint, AgentEndpointConfig
from gem_core.agent.episode import AgentCall, AgentEpisode, Branch, EpisodeOver, MessageError
from gem_core.agent.episodes import episode_trajectory, run_agent_episodes, run_agent_programs
from gem_core.agent.program import AgentCommand, AgentProgram, AgentRun, Grader, TaskSetup

__all__ = [
    "AgentCall", "AgentCommand", "AgentEndpoint", "AgentEndpointConfig", "AgentEpisode", "AgentProgram", "AgentRun",
    "Branch", "EpisodeOver", "Grader", "MessageError", "TaskSetup", "episode_trajectory", "run_agent_episodes", "run_agent_programs",
]
