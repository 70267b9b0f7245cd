"""The MCP tool: call the tools of any MCP server (stdio or HTTP) through ``fastmcp``'s client.

The model writes ``<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>``; the call goes
to the server and the result comes back inside ``<tool_response>...</tool_response>``. The server's tool
list (names, descriptions, argument schemas) is rendered into the instruction.

fastmcp's client is async and a session belongs to one event loop, so the tool keeps one session open
on a private event-loop thread: sync callers wait on it, async callers await it, and the server process
(for stdio) starts once, not per call.

A server that cannot start or that dies is the model's observation, never an exception (the instruction
read at reset names it and says why it could not be reached): a failed start is torn down completely
(loop thread stopped, server process ended) before the call answers with a tool error, and a call whose
session broke (the connection closed or was refused) reconnects a bounded number of times. A tool may have side effects, so a call that timed out or that the server answered
(an error, an HTTP 500) is never sent again: it answers once, saying what happened.

The private loop thread itself can die: a tool of an in-process ``FastMCP`` server that calls ``sys.exit()``
raises ``SystemExit`` on it. Every wait on that loop checks that its thread still runs, so the call in flight
answers at once that the loop stopped (it is not sent again: it may be what stopped it), the next call opens a
new session on a new loop, and ``close()`` does not wait for a shutdown that a dead loop cannot run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument, causes
from gem_core.tools.calls import CallParser, format_instruction
from gem_core.tools.tags import tag_spans
from gem_core.tools.tool import ToolCall, ToolResult, check_count_from_zero, without_lone_surrogates
from gem_core.transport.sync_bridge import LoopThread, run_sync
from gem_core.vector.calls import check_amount, check_count

__all__ = ["MCPTool", "parse_tool_calls"]

_CALL_FORMAT = '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>'

#: Seconds between checks, while waiting on the private loop, that its thread still runs.
_LOOP_CHECK_SECONDS = 0.1


#: What a call answers when its session's connection had closed before it was sent (the server died or hung up
#: between calls): the call never reached the server, so it is sent again on a new session.
_NOT_SENT = object()


class _LoopStopped(Exception):
    """The private loop's thread ended (e.g. ``SystemExit`` from a tool of an in-process server): nothing on that
    loop will finish. Never raised to a caller: it becomes the call's observation."""

    def __init__(self) -> None:
        super().__init__(
            "the MCP client's event loop stopped (a tool of an in-process server may have called sys.exit()); "
            "the next call starts a new session"
        )


def _result_while_running(future: concurrent.futures.Future, loop_thread: LoopThread, timeout: float) -> Any:
    """``future.result(timeout)`` for a future of ``loop_thread``'s loop, ended at once if its thread dies.

    Raises:
        _LoopStopped: if the loop's thread ended before the future did.
        TimeoutError: if ``timeout`` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(max(0.0, min(_LOOP_CHECK_SECONDS, deadline - time.monotonic())))
        except concurrent.futures.TimeoutError:
            if future.done():  # the coroutine's own timeout
                raise
            if not loop_thread.thread.is_alive():
                future.cancel()
                raise _LoopStopped() from None
            if time.monotonic() >= deadline:
                future.cancel()
                raise


async def _await_while_running(future: concurrent.futures.Future, loop_thread: LoopThread, timeout: float) -> Any:
    """:func:`_result_while_running` for a caller on an event loop; a cancelled wait cancels the future.

    Raises:
        _LoopStopped: if the loop's thread ended before the future did.
        TimeoutError: if ``timeout`` seconds pass first.
    """
    waiting = asyncio.wrap_future(future)
    deadline = time.monotonic() + timeout
    try:
        while True:
            await asyncio.wait({waiting}, timeout=max(0.0, min(_LOOP_CHECK_SECONDS, deadline - time.monotonic())))
            if waiting.done():
                return waiting.result()
            if not loop_thread.thread.is_alive():
                raise _LoopStopped()
            if time.monotonic() >= deadline:
                raise TimeoutError()
    finally:
        waiting.cancel()  # nothing when it finished; else the call on the private loop is cancelled


def parse_tool_calls(action: str, tool: str = "mcp") -> list[ToolCall]:
    """Every ``<tool_call>`` block of ``action``; a malformed one becomes a call with ``error`` set."""
    calls = []
    for found in tag_spans(action, "<tool_call>", "</tool_call>"):
        content, error = _parse_call_body(found.body(action))
        calls.append(ToolCall(tool=tool, content=content, span=(found.start, found.end), error=error))
    return calls


def _parse_call_body(body: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as error:
        return None, f"the tool call is not valid JSON ({error}); write {_CALL_FORMAT}"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None, f'the tool call needs a "name" string; write {_CALL_FORMAT}'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            pass
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None, f'"arguments" must be a JSON object; write {_CALL_FORMAT}'
    return {"name": data["name"], "arguments": arguments}, None


def _client_source(server: Any, max_response_bytes: int, on_refused: Any = None, on_status: Any = None) -> Any:
    """What to hand ``fastmcp.Client``: a ``.py`` path becomes a stdio transport, an ``http(s)`` URL a
    transport whose answers are decoded under ``max_response_bytes`` (and whose HTTP error statuses go
    to ``on_status``); configs and server objects pass."""
    if isinstance(server, str) and server.startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        from fastmcp.client.transports import SSETransport, StreamableHttpTransport

        factory = _capped_client_factory(max_response_bytes, on_refused, on_status)
        transport = SSETransport if urlsplit(server).path.rstrip("/").endswith("/sse") else StreamableHttpTransport
        return transport(server, httpx_client_factory=factory)
    if isinstance(server, str) and server.endswith(".py"):
        return Path(server)
    return server


def _capped_client_factory(max_response_bytes: int, on_refused: Any, on_status: Any = None) -> Any:
    """An ``httpx_client_factory`` for fastmcp: its client decodes every answer under the cap.

    httpx inflates each received chunk whole before anyone can count it (a 2 KB ``gzip, gzip`` answer
    becomes a gigabyte); :func:`gem_core.transport.http_limits.capped_transport` decodes under the cap instead.
    ``on_status(status)`` hears every HTTP error status: the MCP client turns a 500 into a bare
    "Server returned an error response", and the tool's answer names the status instead.
    """

    def factory(headers: Any = None, timeout: Any = None, auth: Any = None, **kwargs: Any) -> Any:
        import httpx2

        from gem_core.transport.http_limits import capped_transport

        hooks = dict(kwargs.pop("event_hooks", None) or {})
        if on_status is not None:

            async def note_status(response: Any) -> None:
                if response.status_code >= 400:
                    on_status(response.status_code)

            hooks["response"] = [*hooks.get("response", []), note_status]
        return httpx2.AsyncClient(
            headers=headers,
            auth=auth,
            # MCP's defaults: 30 s to connect and send, 300 s between reads of a held-open event stream.
            timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
            transport=capped_transport(httpx2.AsyncHTTPTransport(), max_response_bytes, on_refused),
            event_hooks=hooks,
            **kwargs,
        )

    return factory


def _item_text(item: Any) -> str:
    """One content item as the model reads it: its text, an embedded resource's text, else a placeholder that
    names what was left out (a resource or link by its URI, so the model can ask for it)."""
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return text
    kind = getattr(item, "type", None) or "non-text"
    resource = getattr(item, "resource", None)
    if resource is not None:  # an embedded resource: text contents are read, a blob is named
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        item, kind = resource, "resource"
    # ``mime_type`` in MCP SDK v2 (where reading ``mimeType`` warns), ``mimeType`` before.
    mime = getattr(item, "mime_type" if "mime_type" in getattr(type(item), "model_fields", {}) else "mimeType", None)
    uri = getattr(item, "uri", None)
    if uri is None:
        return f"[{kind} content]"
    return f"[{kind} {uri}{f' {mime}' if mime else ''}]"


def _result_text(result: Any) -> str:
    parts = [_item_text(item) for item in getattr(result, "content", None) or []]
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, default=str))
    return without_lone_surrogates("\n".join(parts))


def _check_server(server: Any) -> None:
    """A server ``fastmcp.Client`` cannot use fails every call, so it is refused when the tool is made. A path or
    URL passes unchecked: a script that is missing or dies is a server that cannot be reached, which the model
    is told in its observation."""
    if isinstance(server, (str, os.PathLike)):
        return
    from fastmcp.client.transports import infer_transport

    try:
        infer_transport(server)
    except Exception as error:
        raise InvalidArgument(
            f"MCPTool(server={server!r:.80}): expected a server script's path, an http(s):// URL, an MCP config dict or "
            f"a FastMCP server ({type(error).__name__}: {error})."
        ) from None


class MCPTool:
    """Calls tools on an MCP server.

    Args:
        server: anything ``fastmcp.Client`` accepts: a path to a Python server script (run over stdio), an
            ``http(s)://.../mcp`` URL, an MCP config dict (several servers), or a ``FastMCP`` object.
        timeout: seconds per tool call.
        connect_timeout: seconds to start the server and list its tools.
        max_chars: observation length kept from a result.
        reconnects: new sessions tried for one call whose session broke (the server died or hung up).
        max_response_bytes: the largest HTTP answer read from an ``http(s)://`` server, counted decoded
            (a compression bomb stops there; stacked ``Content-Encoding``s are refused). Event streams
            are not capped in total, only in what is held at once.

    Under ``ToolUse(call_format=...)`` (the model's native calls) the server's tools are called by their own
    names (:attr:`tool_names`, :meth:`native_instruction`).

    Raises:
        InvalidArgument: if ``server`` is none of the above, ``timeout`` or ``connect_timeout`` is not a finite
            number of seconds above 0, ``reconnects`` not a whole number of at least 0, or ``max_chars`` or
            ``max_response_bytes`` not a whole number of at least 1.
    """

    name = "mcp"

    def __init__(
        self,
        server: Any,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 60.0,
        max_chars: int = 4000,
        reconnects: int = 2,
        max_response_bytes: int = 8 << 20,
    ):
        import fastmcp  # noqa: F401  (fail at setup, not mid-episode, when the extra is missing)

        # Checked here: a text or a negative number would otherwise fail every call during training.
        _check_server(server)
        self.server = server
        self.timeout = check_amount("MCPTool: timeout", timeout, "seconds")
        self.connect_timeout = check_amount("MCPTool: connect_timeout", connect_timeout, "seconds")
        self.max_chars = check_count("MCPTool: max_chars", max_chars)
        self.reconnects = check_count_from_zero("MCPTool: reconnects", reconnects)
        self.max_response_bytes = check_count("MCPTool: max_response_bytes", max_response_bytes)
        #: The last answer the HTTP transport refused (too large, bad encoding): the MCP client logs such
        #: errors and waits, so the tool names this cause instead of a bare timeout.
        self._refusal: Exception | None = None
        #: The last HTTP error status the server answered (an MCP error names no status).
        self._http_status: int | None = None
        self._lock = threading.Lock()
        self._loop_thread: LoopThread | None = None
        self._client: Any = None
        self._tools: list[dict[str, Any]] = []
        self._pid = os.getpid()

    @property
    def max_call_seconds(self) -> float:
        """The longest one call may take, reconnects included: each attempt may start the server
        (``connect_timeout`` and the start's safety margin), run the call (``timeout`` and its margin) and
        end a broken session (15 s). Large: a slow MCP server is the server's owner's to bound."""
        return (self.reconnects + 1) * (self.connect_timeout + 15 + self.timeout + 5 + 15)

    # The session lives on a private loop; pickling (process backends) sends the configuration only.
    def __getstate__(self) -> dict[str, Any]:
        keys = ("server", "timeout", "connect_timeout", "max_chars", "reconnects", "max_response_bytes")
        return {key: getattr(self, key) for key in keys}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state.pop("server"), **state)

    def _start(self) -> None:
        """Open the session if none is open; on failure nothing is left running and the error propagates."""
        if self._pid != os.getpid():
            # A forked copy: the session and its loop thread stayed in the parent. Start our own.
            self._lock, self._pid = threading.Lock(), os.getpid()
            self._loop_thread = self._client = None
        with self._lock:
            if self._client is not None and self._loop_thread is not None and self._loop_thread.thread.is_alive():
                return
            if self._loop_thread is not None:  # its thread died: the session on it can neither answer nor end
                self._loop_thread.stop()
                self._loop_thread = self._client = None
            loop_thread = LoopThread("gem-mcp-client")
            future = loop_thread.submit(self._connect())
            try:
                # _connect bounds itself and cleans up after a failure; the outer wait is a safety margin.
                client, tools = _result_while_running(future, loop_thread, self.connect_timeout + 15)
            except BaseException:
                future.cancel()
                loop_thread.stop()
                raise
            self._loop_thread, self._client, self._tools = loop_thread, client, tools

    async def _connect(self) -> tuple[Any, list[dict[str, Any]]]:
        from fastmcp import Client

        client = Client(_client_source(self.server, self.max_response_bytes, self._note_refusal, self._note_status), timeout=self.timeout)

        async def open_and_list() -> Any:
            await client.__aenter__()
            return await client.list_tools()

        try:
            listed = await asyncio.wait_for(open_and_list(), self.connect_timeout)
        except BaseException as error:
            await _shutdown_client(client)
            if _is_timeout(error) and _mcp_code(error) is None:
                raise TimeoutError(f"the MCP server did not start and list its tools within {self.connect_timeout:g} s") from None
            raise
        tools = without_lone_surrogates([
            {
                "name": tool.name,
                "description": tool.description or "",
                # ``input_schema`` in MCP SDK v2, ``inputSchema`` before.
                "parameters": getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {},
            }
            for tool in listed
        ])
        return client, tools

    def _note_refusal(self, error: Exception) -> None:
        self._refusal = error

    def _note_status(self, status: int) -> None:
        self._http_status = status

    def _reason(self, error: BaseException) -> str:
        refusal, self._refusal = self._refusal, None
        status, self._http_status = self._http_status, None
        if refusal is not None:
            return f"the server's answer was refused: {refusal}"
        if isinstance(error, _LoopStopped):
            return str(error)
        if _is_timeout(error) and (_mcp_code(error) is not None or not str(error)):
            return f"timed out after {self.timeout:g} s"  # the call's deadline (a start names its own)
        if status is not None and _mcp_code(error) is not None:
            return without_lone_surrogates(f"the MCP server at {self.server} answered HTTP {status} ({error})")
        return without_lone_surrogates(_reason(error))

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The server's tools as ``{"name", "description", "parameters"}`` (connects on first use)."""
        self._start()
        return list(self._tools)

    @property
    def tool_names(self) -> list[str] | None:
        """The server's tool names, which native calls (``ToolUse(call_format=...)``) use as their own; None
        until the server has listed them (not reached yet, or unreachable): a native call naming no other
        tool then comes here, and its answer says what the server did."""
        return [tool["name"] for tool in self._tools] if self._tools else None

    @property
    def instruction(self) -> str:
        """The call format and each of the server's tools with its description and JSON schema, for the task prompt."""
        return self._instruction(
            f"You can call tools: write {_CALL_FORMAT} with one of these tools "
            "(arguments follow the JSON schema shown). The result comes back inside <tool_response>...</tool_response>."
        )

    def native_instruction(self, call_format: str | CallParser) -> str:
        """:attr:`instruction` for ``ToolUse(call_format=...)``: the server's tools are called in the model's own
        format, each by its own name, so that is the example (not a call of a tool named ``mcp``)."""
        example = format_instruction(call_format, "TOOL", "ARGUMENT")
        return self._instruction(f"- a tool of the MCP server, by its own name (TOOL), with arguments following its JSON schema: {example}", "  ")

    def _instruction(self, header: str, indent: str = "") -> str:
        """``header`` and the server's tools. It is read at reset, and a server that cannot be reached must not
        end the episode (each call then says so again), so the instruction names the server and the error."""
        try:
            tools = self.tools
        except Exception as error:
            where = self.server if isinstance(self.server, (str, os.PathLike)) else type(self.server).__name__
            return f"{header}\n{indent}The MCP server {where} could not be reached, so its tools are not listed: {self._reason(error)}."
        lines = (f"{indent}- {tool['name']}: {tool['description'].strip()} Parameters: {json.dumps(tool['parameters'])}" for tool in tools)
        return "\n".join([header, *lines])

    def content_from_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The MCP call of a native call named after this tool itself, whose arguments are ``{"name", "arguments"}``
        (the instruction asks for calls by the server tool's own name; this form is read too).

        Raises:
            InvalidArgument: if ``arguments`` name no server tool; the model reads why in its observation.
        """
        name, inner = arguments.get("name"), arguments.get("arguments", {})
        if not isinstance(name, str) or not isinstance(inner, dict):
            names = ", ".join(self.tool_names or []) or "the server's tools"
            raise InvalidArgument(f"call a tool of the MCP server by its own name ({names}), with its arguments")
        return {"name": name, "arguments": inner}

    def parse(self, action: str) -> list[ToolCall]:
        """The ``<tool_call>`` calls in ``action``, in order (empty if none)."""
        return parse_tool_calls(action, self.name)

    def _unknown(self, call: ToolCall) -> ToolResult | None:
        names = [tool["name"] for tool in self._tools]
        if call.content["name"] in names:
            return None
        observation = f"<tool_response>Unknown tool {call.content['name']!r}; available tools: {', '.join(names)}.</tool_response>"
        return ToolResult(observation, False, {"tool_name": call.content["name"], "error": "unknown tool"})

    async def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        # A session that already saw its server die is not sent the call: a new one is (a close seen only after
        # sending may have run the call). A death the loop has not taken in yet costs one error answer.
        if _session_closed(self._client):
            return _NOT_SENT
        return await self._client.call_tool(name, arguments, raise_on_error=False, timeout=self.timeout)

    def _submit(self, call: ToolCall) -> tuple[concurrent.futures.Future, LoopThread]:
        loop_thread = self._loop_thread
        if loop_thread is None:  # closed by another thread since this call's start
            raise _LoopStopped()
        # A lone surrogate cannot be encoded: over stdio the session's writer died with it (a restart, the state lost).
        return loop_thread.submit(self._call(call.content["name"], without_lone_surrogates(call.content["arguments"]))), loop_thread

    def _answer(self, call: ToolCall, result: Any = None, error: BaseException | None = None) -> ToolResult:
        info: dict[str, Any] = {"tool_name": call.content["name"]}
        if error is not None:
            reason = self._reason(error)
            info["error"] = reason
            return ToolResult(f"<tool_response>The call to {call.content['name']!r} failed: {reason}</tool_response>", False, info)
        text = _result_text(result)
        if len(text) > self.max_chars:
            text = text[: self.max_chars] + f"\n... [{len(text) - self.max_chars} characters cut]"
        ok = not getattr(result, "is_error", False)
        info["is_error"] = not ok
        return ToolResult(f"<tool_response>{text}</tool_response>", ok, info)

    def _start_failed(self, call: ToolCall, error: BaseException) -> ToolResult:
        reason = f"the MCP server could not be reached: {self._reason(error)}"
        return ToolResult(f"<tool_response>The call to {call.content['name']!r} failed: {reason}</tool_response>", False, {"tool_name": call.content["name"], "error": reason})

    def execute(self, call: ToolCall) -> ToolResult:
        """:meth:`aexecute` for sync callers (the session lives on the private loop, so any loop can wait on it)."""
        return run_sync(lambda: self.aexecute(call))

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Call the tool on the MCP server (started or reconnected as needed); a failure comes back as the result's
        observation, never raised.
        """
        for attempt in range(self.reconnects + 1):
            self._refusal = self._http_status = None
            try:
                await asyncio.to_thread(self._start)  # starting the server must not block the caller's loop
            except Exception as error:
                return self._start_failed(call, error)
            unknown = self._unknown(call)
            if unknown is not None:
                return unknown
            try:
                future, loop_thread = self._submit(call)
                result = await _await_while_running(future, loop_thread, self.timeout + 5)
                if result is _NOT_SENT:
                    await asyncio.to_thread(self._drop_session)  # the next attempt (or call) opens a new session
                    if attempt < self.reconnects:
                        continue
                    return self._answer(call, error=ConnectionError("the MCP server died or hung up before the call was sent"))
                return self._answer(call, result)
            except Exception as error:
                # Only a call that never reached the server is retried: a call that timed out, that the server
                # answered (with an error), or whose connection closed while it was in flight may have run, and
                # a tool may have side effects.
                if attempt == self.reconnects or not self._session_broken(error):
                    if _mcp_code(error) == _MCP_CODES["CONNECTION_CLOSED"]:
                        await asyncio.to_thread(self._drop_session)  # answered once; the next call opens a new session
                    return self._answer(call, error=error)
                await asyncio.to_thread(self._drop_session)  # the server refused or forgot the session: a new one
        raise AssertionError("unreachable")

    def _drop_session(self) -> None:
        """End the session (and the stdio server process) and stop the private loop."""
        with self._lock:
            if self._loop_thread is None:
                return
            loop_thread, client = self._loop_thread, self._client
            self._client = self._loop_thread = None
        if client is not None and loop_thread.thread.is_alive():  # a dead loop runs no shutdown: nothing to wait for
            try:
                _result_while_running(loop_thread.submit(_shutdown_client(client)), loop_thread, 15)
            except Exception:
                pass
        loop_thread.stop()

    def close(self) -> None:
        """End the session (and the stdio server process) and stop the private loop; safe to call twice."""
        if self._pid != os.getpid():
            return  # the session belongs to the parent process
        self._drop_session()

    def _session_broken(self, error: BaseException) -> bool:
        """The call failed before the server could run it (the connection was refused, or the server no longer
        knows the session: HTTP 404), not because the server answered, was slow, or closed the connection
        while the call was in flight (CONNECTION_CLOSED: the call may have run; a session that was closed
        before the call is found by :func:`_session_closed`, and the call not sent)."""
        if _is_timeout(error) or isinstance(error, _LoopStopped):  # the call may have run (and stopped the loop)
            return False
        code = _mcp_code(error)
        if code is not None:
            return code == _MCP_CODES["INVALID_REQUEST"] and self._http_status == 404
        return _connection_failed(error)


def _session_closed(client: Any) -> bool:
    """``client``'s session already saw its connection close (the server died or hung up before the next call).
    Read from the MCP SDK's dispatcher (v2); where that is not readable, False: the call is then sent, and a
    connection found closed is answered as an error once, the next call reconnecting."""
    state = getattr(client, "_session_state", None)
    session = getattr(state, "session", None) if state is not None else getattr(client, "_session", None)
    return getattr(getattr(session, "_dispatcher", None), "_closed", False) is True


def _mcp_constant(name: str, default: int) -> int:
    for module in ("mcp_types", "mcp.types"):
        try:
            return int(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            continue
    return default


#: JSON-RPC error codes of the MCP SDK (``mcp_types`` in MCP SDK v2, ``mcp.types`` before).
_MCP_CODES = {name: _mcp_constant(name, default) for name, default in (("REQUEST_TIMEOUT", -32001), ("CONNECTION_CLOSED", -32000), ("INVALID_REQUEST", -32600))}


def _mcp_code(error: BaseException) -> int | None:
    """The JSON-RPC error code of an MCP SDK error (``MCPError`` in v2, ``McpError`` before), else None."""
    try:
        from mcp.shared.exceptions import MCPError as error_type
    except ImportError:
        try:
            from mcp.shared.exceptions import McpError as error_type
        except ImportError:
            return None
    if not isinstance(error, error_type):
        return None
    code = getattr(getattr(error, "error", None), "code", None)
    return code if isinstance(code, int) else None


def _connection_failed(error: BaseException) -> bool:
    """A connection refused or closed before an answer, anywhere in ``error``'s group or chain."""
    import anyio

    kinds: tuple[type, ...] = (ConnectionError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    for module in ("httpx2", "httpx"):
        try:
            kinds += (__import__(module).ConnectError,)
        except (ImportError, AttributeError):
            pass
    return any(isinstance(cause, kinds) for cause in causes(error))


def _is_timeout(error: BaseException) -> bool:
    """Our own deadline, or the MCP client's ``timeout`` (an MCP error with code REQUEST_TIMEOUT)."""
    if isinstance(error, (TimeoutError, concurrent.futures.TimeoutError, asyncio.TimeoutError)):
        return True
    return _mcp_code(error) == _MCP_CODES["REQUEST_TIMEOUT"]


def _reason(error: BaseException) -> str:
    return "timed out" if _is_timeout(error) and not str(error) else f"{type(error).__name__}: {error}"


async def _shutdown_client(client: Any) -> None:
    """Leave the session and stop a kept-alive stdio server process, whatever state the client is in."""
    for step in ("__aexit__", "close"):
        method = getattr(client, step, None)
        if method is None:
            continue
        try:
            await asyncio.wait_for(method(None, None, None) if step == "__aexit__" else method(), 10)
        except BaseException:  # a half-open session may fail to exit; the next step still runs
            pass

