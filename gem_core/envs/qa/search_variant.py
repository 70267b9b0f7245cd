"""``qa:<Dataset>-search``: the QA env with the search tool (Search-R1 style).

An action with ``<search>query</search>`` queries the retrieval server and the passages come back as the
next observation; an action without one is the final answer (see :class:`gem_core.wrappers.tools.ToolUse`).
Start the shipped BM25 server with ``gem-retrieval-server --corpus FILE`` (or use any Search-R1 server).
"""

from __future__ import annotations

from typing import Any

from gem_core.envs.qa.env import QAEnv
from gem_core.registry import forwards_kwargs

__all__ = ["make_qa_with_search", "DEFAULT_SEARCH_URL"]

DEFAULT_SEARCH_URL = "http://127.0.0.1:8000/retrieve"
"""Where the retrieval server listens unless ``search_url=`` or ``$GEM_SEARCH_URL`` says otherwise."""


@forwards_kwargs(QAEnv)
def make_qa_with_search(
    *,
    search_url: str | None = None,
    topk: int = 3,
    max_tool_calls: int = 4,
    search_timeout: float = 5.0,
    **env_kwargs: Any,
):
    """A :class:`QAEnv` (built from ``env_kwargs``) wrapped with :class:`~gem_core.tools.search.SearchTool`.

    Args:
        search_url: the server's ``/retrieve`` endpoint; default ``$GEM_SEARCH_URL`` or :data:`DEFAULT_SEARCH_URL`.
        topk: passages per query.
        max_tool_calls: searches allowed per episode; after that the reply is graded.
        search_timeout: seconds per HTTP attempt.
    """
    from gem_core.tools.search import SearchTool, resolve_search_url
    from gem_core.wrappers.tools import ToolUse

    url = resolve_search_url(search_url, DEFAULT_SEARCH_URL)  # a bad $GEM_SEARCH_URL is named as the variable
    tool = SearchTool(url, topk=topk, timeout=search_timeout)
    return ToolUse(QAEnv(**env_kwargs), [tool], max_tool_calls=max_tool_calls)
