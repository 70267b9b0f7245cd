"""Choose what the agent sees each turn: the last observation, the whole history, or chat messages.

Multi-turn training with a chat template (:mod:`gem_core.rollout`) wants ``"raw"``: the template
carries the history. Trainers that rebuild the prompt every turn (one sample per turn, no template)
want the history rendered into the observation itself.
"""

from __future__ import annotations

from typing import Any, Literal

from gem_core.env import StepResult
from gem_core.errors import InvalidArgument
from gem_core.wrappers.core import Wrapper

__all__ = ["ObservationFormat", "ObservationMode"]

ObservationMode = Literal["raw", "history", "history_with_actions", "chat"]
"""What the policy sees each turn: the env's ``raw`` observation, the ``history`` of observations, the history with the actions (``history_with_actions``), or the conversation as ``chat`` messages (see :class:`ObservationFormat`).

"""
_MODES = ("raw", "history", "history_with_actions", "chat")


class ObservationFormat(Wrapper):
    """Formats observations by ``mode``.

    - ``"raw"``: the env's observation unchanged.
    - ``"history"``: every observation so far, oldest first, separated by blank lines.
    - ``"history_with_actions"``: the transcript, ``Observation:``/``Action:`` blocks, ending with the
      newest observation.
    - ``"chat"``: the observation unchanged, and ``info["messages"]`` holds the conversation as chat
      messages (``user`` observations, ``assistant`` actions), ready for ``apply_chat_template``.

    Args:
        env (Env): the env to wrap.
        mode: one of the modes above.
        system_prompt: in ``"chat"`` mode, a system message put before the conversation.

    Raises:
        InvalidArgument: if ``mode`` is not one of the four.
    """

    def __init__(self, env, mode: ObservationMode = "raw", *, system_prompt: str | None = None):
        if mode not in _MODES:
            raise InvalidArgument(f"ObservationFormat(mode={mode!r}): expected one of {', '.join(_MODES)}.")
        super().__init__(env)
        self.mode = mode
        self.system_prompt = system_prompt
        self.observations: list[str] = []
        self.actions: list[str] = []

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.observations, self.actions = [observation], []
        return self._format(info)

    def on_step(self, action: str, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = result
        self.actions.append(action)
        self.observations.append(observation)
        observation, info = self._format(info)
        return observation, reward, terminated, truncated, info

    def _format(self, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.mode == "history":
            return "\n\n".join(self.observations), info
        if self.mode == "history_with_actions":
            blocks = [f"Observation: {self.observations[0]}"]
            for action, observation in zip(self.actions, self.observations[1:], strict=True):
                blocks += [f"Action: {action}", f"Observation: {observation}"]
            return "\n\n".join(blocks), info
        if self.mode == "chat":
            messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            messages.append({"role": "user", "content": self.observations[0]})
            for action, observation in zip(self.actions, self.observations[1:], strict=True):
                messages += [{"role": "assistant", "content": action}, {"role": "user", "content": observation}]
            return self.observations[-1], {**info, "messages": messages}
        return self.observations[-1], info
