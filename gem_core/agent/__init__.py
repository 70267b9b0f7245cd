"""Agent programs as trainable episodes: an OpenAI-compatible endpoint on loopback records their calls as tokens.

- :mod:`~gem_core.agent.episode`: :class:`AgentEpisode`, one episode's calls stitched into token trajectories
  (extended where the messages extend, forked where the agent rewrote its history).
- :mod:`~gem_core.agent.endpoint`: :class:`AgentEndpoint`, ``/v1/chat/completions`` and ``/v1/completions``
  answered by any :class:`~gem_core.rollout.policy.Policy`, episodes keyed by API key or URL path.
- :mod:`~gem_core.agent.program`: :class:`AgentProgram`, an agent program run as a subprocess against one
  task, with time and turn limits and a grader's reward.

Needs the ``serve`` extra (starlette, uvicorn) for the endpoint.
"""

from gem_core.agent.endpoint import AgentEndpoint, AgentEndpointConfig
from gem_core.agent.episode import AgentCall, AgentEpisode, Branch, EpisodeOver, MessageError
from gem_core.agent.program import AgentCommand, AgentProgram, AgentRun, Grader

__all__ = [
    "AgentCall", "AgentCommand", "AgentEndpoint", "AgentEndpointConfig", "AgentEpisode", "AgentProgram", "AgentRun",
    "Branch", "EpisodeOver", "Grader", "MessageError",
]
