"""``gem.wrappers.observation_wrapper.ObservationWrapper``: GEM's history formats on the core's
:class:`~gem_core.wrappers.ObservationFormat`.

- ``include_action=False``: every observation so far (the core's ``"history"`` mode);
- ``include_action=True``: observations and actions interleaved (``"history_with_actions"``);
- ``include_chat_template=True``: the conversation rendered by ``tokenizer``'s chat template with the
  generation prompt (``"chat"`` mode's ``info["messages"]``, rendered);
- ``apply_chat_template_on_reset=True``: the first observation rendered as one user turn with the
  generation prompt, then each action and the observation after it appended as text (the whole episode
  continues that one assistant turn).

The text is GEM's, character for character (a model trained or evaluated on GEM's prompts sees the same
prompts here): each observation and action on its own line (a newline added where one is missing, none
between), an action as ``info["parsed_action"]`` where the env reports one, a tool's answer as a ``tool``
turn in the chat template, at most ``max_history_length`` actions (and one more observation) kept. The
latest ``info["prefix"]`` goes before the history and ``info["suffix"]`` after it: GEM's games put their
board there, so a long history shows the board once, in its current state. The core's format (its
``info["messages"]`` in chat mode) is still computed underneath, for the core's consumers.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gem.core import ForwardPublicAttributes
from gem_core.env import StepResult
from gem_core.errors import InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.vector.calls import check_count
from gem_core.wrappers.observation import ObservationFormat, ObservationMode

__all__ = ["ObservationWrapper"]


def maybe_add_new_line(text: str) -> str:
    """``text`` ending in a newline (GEM's joiner: none added to an empty text or one that has it)."""
    return text + "\n" if text and not text.endswith("\n") else text


class ObservationWrapper(ForwardPublicAttributes, ObservationFormat):
    """GEM's observation history formats (see the module docstring for the text each gives).

    Args:
        env: The env (or wrapper) whose observations are formatted.
        include_action: Interleave the actions with the observations (else observations only).
        include_chat_template: Render the conversation with ``tokenizer``'s chat template (needs ``include_action``).
        apply_chat_template_on_reset: Render only the first observation as a user turn, then append the
            episode as text.
        max_history_length: Actions kept (and one more observation); 0 shows only the current observation, None
            keeps the whole episode.
        tokenizer: A tokenizer with a chat template; needed by either chat template option.

    Raises:
        InvalidArgument: Both chat template options are set, either is set without ``tokenizer``, or
            ``include_chat_template`` is set without ``include_action``, or ``max_history_length`` is not None
            or a whole number from 0.
    """

    #: A tokenizer is a resource, not episode state (see gem_core.wrappers.core.Wrapper.get_state).
    state_excludes = frozenset({"tokenizer"})

    def __init__(
        self,
        env: Any,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Tokenizer | None = None,
    ):
        if include_chat_template and apply_chat_template_on_reset:
            raise InvalidArgument("ObservationWrapper: include_chat_template and apply_chat_template_on_reset cannot both be True.")
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise InvalidArgument("ObservationWrapper: a chat template needs tokenizer=, e.g. AutoTokenizer.from_pretrained(...).")
        if max_history_length is not None:
            # GEM read 0 as falsy for one queue and as a length for the other, and its first step failed
            max_history_length = check_count("ObservationWrapper: max_history_length", max_history_length, least=0,
                                             none_means="the whole episode")
        if include_chat_template and not include_action:
            raise InvalidArgument("ObservationWrapper: include_chat_template needs include_action=True (the actions are the assistant turns).")
        mode: ObservationMode = "chat" if include_chat_template else "history_with_actions" if include_action else "history"
        if apply_chat_template_on_reset:
            mode = "raw"  # the transcript is appended to the rendered prompt below, without labels
        super().__init__(env, mode)
        self.tokenizer = tokenizer
        self.include_action = include_action
        self.include_chat_template = include_chat_template
        self.apply_chat_template_on_reset = apply_chat_template_on_reset
        self.max_history_length = max_history_length
        # GEM's queues: (observation, came from a tool) and the actions between them
        self.obs_queue: deque[tuple[str, bool]] = deque(maxlen=None if max_history_length is None else max_history_length + 1)
        self.act_queue: deque[str] = deque(maxlen=max_history_length)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (``seed`` positionally, as GEM calls it); the history starts over.

        Returns:
            The first observation in the chosen format (with the env's ``info["prefix"]``/``["suffix"]`` around
            it), and the env's ``info``.
        """
        return super().reset(seed=seed, options=options)

    def _render(self, messages: list[dict[str, str]]) -> str:
        assert self.tokenizer is not None  # __init__ refuses a chat template without a tokenizer
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _shown(self, info: dict[str, Any]) -> str:
        return info.get("prefix", "") + self._history() + info.get("suffix", "")

    def _history(self) -> str:
        if not self.include_action:
            return "".join(maybe_add_new_line(seen) for seen, _ in self.obs_queue)
        turns = list(zip(list(self.obs_queue)[:-1], self.act_queue, strict=True))
        last, last_is_tool = self.obs_queue[-1]
        if self.include_chat_template:
            messages: list[dict[str, str]] = []
            for (seen, is_tool), action in turns:
                messages += [{"role": "tool" if is_tool else "user", "content": seen}, {"role": "assistant", "content": action}]
            messages.append({"role": "tool" if last_is_tool else "user", "content": last})
            return self._render(messages)
        text = "".join(maybe_add_new_line(seen) + maybe_add_new_line(action) for (seen, _), action in turns)
        return text + maybe_add_new_line(last)

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.apply_chat_template_on_reset:
            observation = self._render([{"role": "user", "content": observation}])
        self.obs_queue.clear()
        self.act_queue.clear()
        self.obs_queue.append((observation, bool(info.get("use_tool", False))))
        _, info = super().on_reset(observation, info)
        return self._shown(info), info

    def on_step(self, action: str, result: StepResult) -> StepResult:
        observation, reward, terminated, truncated, info = result
        self.act_queue.append(info.get("parsed_action", action))
        self.obs_queue.append((observation, bool(info.get("use_tool", False))))
        _, reward, terminated, truncated, info = super().on_step(action, result)
        return self._shown(info), reward, terminated, truncated, info
