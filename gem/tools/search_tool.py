"""``gem.tools.search_tool.SearchTool``: the core's search tool (:class:`gem_core.tools.search.SearchTool`)
with GEM's constructor. Without ``search_url`` it queries ``$GEM_SEARCH_URL`` (GEM reads ``SEARCH_URL``),
else the local retrieval server at ``http://127.0.0.1:8000/retrieve`` (``gem-retrieval-server``)."""

from __future__ import annotations

from gem.tools.base_tool import GemToolMethods
from gem_core.envs.qa.search_variant import DEFAULT_SEARCH_URL
from gem_core.tools.search import SearchTool as CoreSearchTool
from gem_core.tools.search import resolve_search_url

__all__ = ["SearchTool"]


class SearchTool(GemToolMethods, CoreSearchTool):
    """Queries the retrieval server for the first ``<search>...</search>`` block of an action, as GEM does.

    ``num_workers`` is accepted for GEM's signature; calls are made one action at a time, and concurrency
    comes from the vector env's backend.

    Args:
        num_workers: Accepted for GEM's signature; unused.
        search_url: The retrieval server's endpoint (None: ``$GEM_SEARCH_URL``, else the local
            ``http://127.0.0.1:8000/retrieve``).
        topk: Passages returned per query.
        timeout: Seconds one query may take.
    """

    tool_type = "search"
    #: GEM runs one query per action; :class:`~gem_core.wrappers.tools.ToolUse` answers a further one as not
    #: run, so it neither pays ``tool_reward`` again nor spends the episode's calls (the core's tool runs them all).
    max_calls_per_action = 1

    def __init__(self, num_workers: int = 1, search_url: str | None = None, topk: int = 3, timeout: float = 5):
        del num_workers
        url = resolve_search_url(search_url, DEFAULT_SEARCH_URL)  # a bad $GEM_SEARCH_URL is named as the variable
        super().__init__(url, topk=topk, timeout=timeout)
