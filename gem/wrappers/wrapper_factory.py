"""``gem.wrappers.wrapper_factory``: GEM's ``WRAPPER_FACTORY`` (name -> ``env -> env``) and
``get_wrapper_fns``, with GEM's names, order and settings:

1. a tool, optionally: ``python_tool`` (0.05 per call, 0.25 more per clean run, 5 calls),
   ``python_tool_no_int_reward``, ``python_tool_no_int_reward_last_line_error``, ``search_tool``
   (0.3 per call, 5 calls), ``search_tool_no_int_reward``;
2. an observation format: ``concat``, ``concat_with_action``, ``concat_chat`` and
   ``concat_chat_on_reset`` (both need ``tokenizer=``, see :data:`TOKENIZER_REQUIRED`);
3. optionally ``episode_tracking``, outermost.

Each tool wrapper builds its tool when it wraps an env (GEM builds one at import), so importing this
module needs neither the sandbox nor ``httpx``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem.wrappers.observation_wrapper import ObservationWrapper
from gem_core.errors import UnknownKey
from gem_core.protocols import Tokenizer

__all__ = ["WRAPPER_FACTORY", "TOKENIZER_REQUIRED", "get_wrapper_fns"]


def _with_python(env: Any, *, tool_reward: float, tool_success_reward: float, keep_error_last_line: bool = False) -> Any:
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    tool = PythonCodeTool(timeout=5, keep_error_last_line=keep_error_last_line)
    return ToolEnvWrapper(env, tools=[tool], tool_reward=tool_reward, tool_success_reward=tool_success_reward, max_tool_uses=5)


def _with_search(env: Any, *, tool_reward: float) -> Any:
    from gem.tools.search_tool import SearchTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    return ToolEnvWrapper(env, tools=[SearchTool(topk=3, timeout=5)], tool_reward=tool_reward, max_tool_uses=5)


WRAPPER_FACTORY: dict[str, Callable[..., Any]] = {
    "python_tool": functools.partial(_with_python, tool_reward=0.05, tool_success_reward=0.25),
    "python_tool_no_int_reward": functools.partial(_with_python, tool_reward=0.0, tool_success_reward=0.0),
    "python_tool_no_int_reward_last_line_error": functools.partial(
        _with_python, tool_reward=0.0, tool_success_reward=0.0, keep_error_last_line=True
    ),
    "search_tool": functools.partial(_with_search, tool_reward=0.3),
    "search_tool_no_int_reward": functools.partial(_with_search, tool_reward=0.0),
    "concat": functools.partial(ObservationWrapper, include_action=False, include_chat_template=False),
    "concat_chat": functools.partial(ObservationWrapper, include_action=True, include_chat_template=True),
    "concat_with_action": functools.partial(ObservationWrapper, include_action=True, include_chat_template=False),
    "concat_chat_on_reset": functools.partial(
        ObservationWrapper, include_action=True, include_chat_template=False, apply_chat_template_on_reset=True
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}
"""GEM's wrapper names, each with the function that wraps an env (``fn(env)``; chat ones also take ``tokenizer=``)."""

TOKENIZER_REQUIRED = ["concat_chat", "concat_chat_on_reset"]
"""The names that render a chat template and so need ``tokenizer=``."""


def get_wrapper_fns(wrappers: str, tokenizer: Tokenizer | None = None) -> list[Callable[..., Any]]:
    """The wrappers named in the comma-separated ``wrappers`` (``"python_tool,concat_chat"``), in order,
    with ``tokenizer`` given to those that need it.

    Raises:
        UnknownKey: (a KeyError) an unknown name (the message lists the known ones).
    """
    fns = []
    for name in filter(None, (part.strip() for part in (wrappers or "").split(","))):
        if name not in WRAPPER_FACTORY:
            raise UnknownKey(f"Unknown wrapper {name!r}; known: {', '.join(WRAPPER_FACTORY)}.")
        fn = WRAPPER_FACTORY[name]
        if name in TOKENIZER_REQUIRED and tokenizer is not None:
            fn = functools.partial(fn, tokenizer=tokenizer)
        fns.append(fn)
    return fns
