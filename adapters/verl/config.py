"""The agent-loop config verl needs, shipped inside the package so a wheel install has it too.

    python -m gem_adapters.verl.config > gem_agent_loop.yaml

then pass ``actor_rollout_ref.rollout.agent.agent_loop_config_path=gem_agent_loop.yaml`` to verl
(``python -m gem_adapters.files`` lists this and the other frameworks' files).
"""

from __future__ import annotations

from gem_adapters.files import shipped_file

__all__ = ["AGENT_LOOP_YAML", "agent_loop_yaml"]

AGENT_LOOP_YAML = shipped_file("verl-agent-loop")
"""The agent loop YAML inside the installed package (a path verl can read directly when the package is not zipped)."""


def agent_loop_yaml() -> str:
    """The YAML text: one ``gem_env`` entry naming :class:`~gem_adapters.verl.agent_loop.GemAgentLoop` and its defaults."""
    return AGENT_LOOP_YAML.read_text(encoding="utf-8")


if __name__ == "__main__":
    print(agent_loop_yaml(), end="")
