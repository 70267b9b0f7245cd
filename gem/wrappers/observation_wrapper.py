"""``gem.wrappers.observation_wrapper.ObservationWrapper``: GEM's history formats on the core's
:class:`~gem_core.wrappers.ObservationFormat`.

- ``include_action=False``: every observation so far (the core's ``"history"`` mode);
- ``include_action=True``: observations and actions interleaved (``"history_with_actions"``);
- ``include_chat_template=True``: the conversation rendered by ``tokenizer``'s chat template with the
  generation prompt (``"chat"`` mode's ``info["messages"]``, rendered);
- ``apply_chat_template_on_reset=True``: the first observation rendered as one user turn with the
  generation prompt, then each action and the observation after it appended as text (the whole episode
  continues that one assistant turn).

The separators are the core's (blank lines, ``Observation:``/``Action:`` labels), not GEM's newlines.
As in GEM, the latest ``info["prefix"]`` goes before the history and ``info["suffix"]`` after it: GEM's
games put their board there, so a long history shows the board once, in its current state.
"""

from __future__ import annotations

from typing import Any

from gem_core.env import StepResult
from gem_core.errors import InvalidArgument
from gem_core.wrappers.observation import ObservationFormat

__all__ = ["ObservationWrapper"]


class ObservationWrapper(ObservationFormat):
    """See the module docstring. ``max_history_length`` must be None: the core keeps the whole history."""

    #: A tokenizer is a resource, not episode state (see gem_core.wrappers.core.Wrapper.get_state).
    state_excludes = frozenset({"tokenizer"})

    def __init__(
        self,
        env: Any,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Any = None,
    ):
        if include_chat_template and apply_chat_template_on_reset:
            raise InvalidArgument("ObservationWrapper: include_chat_template and apply_chat_template_on_reset cannot both be True.")
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise InvalidArgument("ObservationWrapper: a chat template needs tokenizer=, e.g. AutoTokenizer.from_pretrained(...).")
        if include_chat_template and not include_action:
            raise InvalidArgument("ObservationWrapper: include_chat_template needs include_action=True (the actions are the assistant turns).")
        if max_history_length is not None:
            raise InvalidArgument(
                f"ObservationWrapper(max_history_length={max_history_length}): not supported, the whole history is kept; "
                "leave it None."
            )
        mode = "chat" if include_chat_template else "history_with_actions" if include_action else "history"
        if apply_chat_template_on_reset:
            mode = "raw"  # the transcript is appended to the rendered prompt below, without labels
        super().__init__(env, mode)
        self.tokenizer = tokenizer
        self.apply_chat_template_on_reset = apply_chat_template_on_reset

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return super().reset(seed=seed, options=options)

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _shown(self, observation: str, info: dict[str, Any]) -> str:
        return info.get("prefix", "") + self._history(observation, info) + info.get("suffix", "")

    def _history(self, observation: str, info: dict[str, Any]) -> str:
        if self.mode == "chat":
            return self._render(info["messages"])
        if self.apply_chat_template_on_reset:
            turns = (f"{action}\n\n{seen}" for action, seen in zip(self.actions, self.observations[1:]))
            return self.observations[0] + "\n\n".join(turns)  # the action goes right after the generation prompt
        return observation

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.apply_chat_template_on_reset:
            observation = self._render([{"role": "user", "content": observation}])
        observation, info = super().on_reset(observation, info)
        return self._shown(observation, info), info

    def on_step(self, action: str, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = super().on_step(action, result)
        return self._shown(observation, info), reward, terminated, truncated, info
