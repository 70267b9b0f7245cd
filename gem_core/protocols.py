"""What the core asks of the objects a framework hands it: a tokenizer and a text env.

Both are :class:`typing.Protocol` classes: a value fits by having the members, not by subclassing, so a
``transformers`` tokenizer, a test's in-process tokenizer, a core :class:`~gem_core.env.Env` or an env
behind a worker or a server all fit. Each lists only the members the core calls, with the keywords it
passes, so a type checker flags a call the real objects would not take (the core checks neither at run
time: they are for the checker and the reader). The third boundary, the policy that samples tokens, is
:class:`gem_core.rollout.policy.Policy` (:class:`~gem_core.rollout.policy.ImagePolicy` for one that takes images).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, SupportsFloat

__all__ = ["TextEnv", "Tokenizer"]


class Tokenizer(Protocol):
    """A Hugging Face-style tokenizer with a chat template (``transformers.PreTrainedTokenizerBase`` fits).

    The core encodes env text and decodes policy tokens with it, renders conversations through its chat
    template (:class:`~gem_core.rollout.chat_template.ChatTemplate`, which refuses a tokenizer whose
    ``chat_template`` is empty) and reads its end-of-sequence and padding ids.
    """

    #: The model's Jinja chat template; None or empty when the tokenizer has none.
    chat_template: Any

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-sequence id (one of the ids that end a turn); None when the tokenizer has none."""
        ...

    @property
    def pad_token_id(self) -> int | None:
        """The padding id, for batched generation; None when the tokenizer has none."""
        ...

    def __len__(self) -> int:
        """The vocabulary size, added tokens included (ids at or above it are refused)."""
        ...

    def encode(self, text: str, *, add_special_tokens: bool = ..., **kwargs: Any) -> list[int]:
        """The ids of ``text``; the core passes ``add_special_tokens=False`` (the template adds the glue)."""
        ...

    def decode(self, token_ids: Sequence[int], *, skip_special_tokens: bool = ..., **kwargs: Any) -> str:
        """The text of ``token_ids``."""
        ...

    def apply_chat_template(self, conversation: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        """Render ``conversation`` (role/content messages) with the chat template: text with ``tokenize=False``,
        else ids."""
        ...

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """The token strings of ``ids`` (what OpenAI-style log-probability answers name)."""
        ...


class TextEnv(Protocol):
    """An env that reads and writes text: gymnasium's reset/step with string observations and actions.

    :class:`gem_core.env.Env` fits, and so does what :func:`gem_core.placement.make_env` returns for an env
    in a worker, a Ray actor or behind ``gem serve``.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode; returns ``(observation, info)``. The same seed gives the same episode."""
        ...

    def step(self, action: str) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Play ``action``; returns ``(observation, reward, terminated, truncated, info)``."""
        ...

    def close(self) -> None:
        """Release what the env holds (processes, servers, files); safe to call twice."""
        ...
