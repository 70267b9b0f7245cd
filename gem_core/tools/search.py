"""The search tool: ``<search>query</search>`` in an action, the top passages back as the observation.

It talks to a retrieval server of the Search-R1 family over HTTP (``POST /retrieve``): the BM25 server
that ships with GEM (``gem-retrieval-server``) or an existing dense-retrieval server. Network trouble
never raises: within its deadline the tool retries (:mod:`gem_core.transport.http_call`), then answers with an
observation saying the search failed. The server's answer is untrusted: its size is capped, its shape
checked, and the observation cut to ``max_chars``.
"""

from __future__ import annotations

import math
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.settings import environment_value
from gem_core.tools.tags import tag_spans
from gem_core.tools.tool import ToolCall, ToolResult, check_count_from_zero, text_argument, without_lone_surrogates
from gem_core.transport.http_call import CallFailed, Reply, arequest
from gem_core.transport.sync_bridge import run_sync
from gem_core.vector.calls import check_amount, check_count

__all__ = ["SearchTool", "format_passages", "resolve_search_url"]


def _contents(item: Any) -> str | None:
    """The passage text of one hit (``{"document": {...}, "score": s}`` or a bare document), or None."""
    document = item.get("document", item) if isinstance(item, dict) else None
    if isinstance(document, dict) and isinstance(document.get("contents"), str):
        return without_lone_surrogates(document["contents"])
    return None


def format_passages(documents: list[Any]) -> str:
    """Passages as Search-R1 shows them: ``Doc 1(Title: ...) text``, one per line (malformed hits skipped)."""
    lines: list[str] = []
    for item in documents:
        contents = _contents(item)
        if contents is None:
            continue
        title, _, text = contents.partition("\n")
        lines.append(f"Doc {len(lines) + 1}(Title: {title.strip().strip(chr(34))}) {text.strip()}")
    return "\n".join(lines)


def _check_url(url: object, source: str | None = None) -> None:
    """A URL the HTTP client cannot use raises from every search (not the failed-search observation network
    trouble gets), so it is refused when the tool is made. ``source``: the variable the value came from, named instead
    of the argument."""
    import httpx

    where = f"SearchTool(url={url!r})" if source is None else f"Search URL {url!r} (from ${source})"
    example = "e.g. http://127.0.0.1:8000/retrieve"
    if not isinstance(url, str):
        raise InvalidArgument(f"{where}: expected an http:// or https:// URL with a host, {example}.")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidArgument(f"{where}: not a URL ({exc}); {example}.") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidArgument(f"{where}: expected an http:// or https:// URL with a host, {example}.")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise InvalidArgument(f"{where}: the port must be 1 to 65535, got {parsed.port}; {example}.")


def resolve_search_url(search_url: str | None, default: str) -> str:
    """``search_url``, else ``$GEM_SEARCH_URL``, else ``default``: the endpoint a search env or tool queries. A value from
    the variable is checked here, so a malformed one is refused naming the variable, not an argument nobody gave.

    Raises:
        InvalidArgument: ``$GEM_SEARCH_URL`` is not an http(s) URL with a host (and a port from 1 to 65535).
    """
    if search_url:
        return search_url
    value = environment_value("GEM_SEARCH_URL")
    if not value:
        return default
    _check_url(value, "GEM_SEARCH_URL")
    return value


class SearchTool:
    """Queries a retrieval server for every ``<search>...</search>`` block of an action.

    Args:
        url: the server's retrieve endpoint.
        topk: passages per query.
        timeout: seconds for the whole call, retries included.
        retries: further attempts after a failed one (connection errors, 5xx answers) while time remains.
        backoff: seconds before the first retry, doubled for each next one.
        max_chars: the longest observation; longer passages are cut with a note.
        max_response_bytes: the largest server answer read; a larger one is a failed search.

    Raises:
        InvalidArgument: if ``url`` is not an http(s) URL with a host (and a port from 1 to 65535), ``timeout``
            is not a finite number of seconds above 0, ``backoff`` not a finite number of seconds of 0 or more,
            ``retries`` not a whole number of at least 0, or ``topk``, ``max_chars`` or ``max_response_bytes``
            not a whole number of at least 1.
    """

    name = "search"

    def __init__(
        self,
        url: str = "http://127.0.0.1:8000/retrieve",
        *,
        topk: int = 3,
        timeout: float = 5.0,
        retries: int = 2,
        backoff: float = 0.2,
        max_chars: int = 4000,
        max_response_bytes: int = 2 << 20,
    ):
        import httpx  # noqa: F401  (fail at setup, not at the first call, when the extra is missing)

        _check_url(url)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
            # nan or inf would raise from every search, and 0 or less fail each one without an attempt
            raise InvalidArgument(f"SearchTool(timeout={timeout!r}): expected a finite number of seconds above 0, e.g. timeout=5.")
        # Checked here: a text or a negative number would otherwise fail (or raise from) every search.
        self.url = url
        self.topk = check_count("SearchTool: topk", topk)
        self.timeout = timeout
        self.retries = check_count_from_zero("SearchTool: retries", retries)
        self.backoff = check_amount("SearchTool: backoff", backoff, "seconds", zero_allowed=True)
        self.max_chars = check_count("SearchTool: max_chars", max_chars)
        self.max_response_bytes = check_count("SearchTool: max_response_bytes", max_response_bytes)

    @property
    def max_call_seconds(self) -> float:
        """The longest one query may take: ``timeout`` covers the whole call, retries included; one
        second more for reading and checking the answer."""
        return self.timeout + 1.0

    @property
    def instruction(self) -> str:
        """How to write a search, for the task prompt."""
        return (
            "You can search a knowledge base: write <search>your query</search>. The best matching passages "
            "come back inside <information>...</information>."
        )

    def parse(self, action: str) -> list[ToolCall]:
        """The ``<search>`` queries in ``action``, in order; an empty query is a call with an error the agent sees."""
        calls = []
        for found in tag_spans(action, "<search>", "</search>"):
            query = without_lone_surrogates(found.body(action).strip())
            error = None if query else "the query is empty: write <search>what to look up</search>"
            calls.append(ToolCall(tool=self.name, content=query, span=(found.start, found.end), error=error))
        return calls

    def _answer(self, query: str, reply: Reply) -> ToolResult:
        if reply.status != 200:
            return self._failure(query, f"the server at {self.url} answered HTTP {reply.status}: {reply.text[:200]}")
        try:
            result = reply.json()["result"]
        except (ValueError, RecursionError, KeyError, TypeError):
            result = None
        if not isinstance(result, list) or not result or not isinstance(result[0], list):
            return self._failure(query, f"the server at {self.url} answered with an unexpected body: {reply.text[:200]!r}")
        documents = result[0]
        scores = [item.get("score") for item in documents if isinstance(item, dict) and "document" in item]
        body = format_passages(documents) or "No passages found."
        if len(body) > self.max_chars:
            body = body[: self.max_chars] + f"\n... [{len(body) - self.max_chars} characters cut]"
        return ToolResult(f"<information>{body}</information>", True, {"query": query, "scores": scores, "n": len(documents)})

    def _failure(self, query: str, reason: str) -> ToolResult:
        return ToolResult(
            f"<information>Search failed: {reason}. No passages for this query; answer from what you know or try later.</information>",
            False,
            {"query": query, "error": reason},
        )

    argument_name = "query"

    def content_from_arguments(self, arguments: dict[str, Any]) -> str:
        """The query of a native call (``ToolUse(call_format=...)``): its ``query`` argument, which must be text,
        stripped as :meth:`parse` strips a tag's. A blank query is refused here as there: sent, it came back
        "No passages found." with ok=True, paying ``per_success`` for a call that looked nothing up.

        Raises:
            InvalidArgument: as :func:`~gem_core.tools.tool.text_argument`, or if the query is blank; the model
                reads why (a format error), and nothing is sent.
        """
        query = text_argument(arguments, self.argument_name, "the query").strip()
        if not query:
            raise InvalidArgument(f"the query is empty: give the `{self.argument_name}` argument what to look up")
        return query

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Send the query to the retrieval server; its passages (or the failure, never raised) are the observation."""
        query = without_lone_surrogates(call.content)
        try:
            reply = await arequest(
                "POST",
                self.url,
                payload={"queries": [query], "topk": self.topk, "return_scores": True},
                timeout=self.timeout,
                retries=self.retries,
                backoff=self.backoff,
                max_bytes=self.max_response_bytes,
            )
        except CallFailed as error:
            return self._failure(query, f"the retrieval server: {error.reason}")
        return self._answer(query, reply)

    def execute(self, call: ToolCall) -> ToolResult:
        """:meth:`aexecute` for a caller without an event loop."""
        return run_sync(lambda: self.aexecute(call))

    def close(self) -> None:
        """Nothing to release: each call opens and closes its own connection."""
