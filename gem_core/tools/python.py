"""The Python tool: the model writes a program, the sandbox runs it, the output is the next observation.

Calls are ``<python>...</python>`` blocks or fenced ````` ```python ... ``` ````` blocks; only the first
complete block in an action runs (one program per turn, like a notebook cell). Programs run in
:mod:`gem_core.tools.sandbox`, isolated and resource-limited.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.tools.sandbox import SandboxResult, arun_python, resolve_mode, run_python
from gem_core.tools.sandbox.config import mode_from_environment, resolve_backend
from gem_core.tools.sandbox.pool import check_memory_mb
from gem_core.tools.tags import tag_spans
from gem_core.tools.tool import ToolCall, ToolResult, text_argument
from gem_core.vector.calls import check_amount, check_count

__all__ = ["PythonTool", "find_python_block", "format_sandbox_result"]

# A fence's opener holds the closer (```), so this pattern cannot rescan far; <python> tags are found
# by :func:`tag_spans` in one pass (a regex would rescan from every unclosed opener).
_FENCED = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)

_LIMIT_MESSAGES = {
    "time": "the program ran longer than {timeout:g} s and was stopped",
    "cpu": "the program used more CPU time than allowed and was stopped",
    "memory": "the program ran out of memory (limit {memory_mb} MiB)",
    "output": "the program printed more output than allowed and was stopped",
    "processes": "the program tried to start more processes or threads than allowed",
    "file_size": "the program tried to write a file larger than allowed",
    "open_files": "the program opened more files than allowed",
    "disk": "the program filled the sandbox's temporary disk",
}


def find_python_block(action: str) -> ToolCall | None:
    """The first complete Python block in ``action``, or None (also for an action that is not a str)."""
    if not isinstance(action, str):
        return None
    found: list[tuple[tuple[int, int], str]] = []
    tagged = next(tag_spans(action, "<python>", "</python>"), None)
    if tagged is not None:
        found.append(((tagged.start, tagged.end), tagged.body(action)))
    fenced = _FENCED.search(action)
    if fenced is not None:
        found.append((fenced.span(), fenced.group(1)))
    if not found:
        return None
    span, code = min(found, key=lambda item: item[0][0])
    inner = _FENCED.search(code)
    if inner and code.strip().startswith("```"):  # <python>```python ... ```</python>
        code = inner.group(1)
    return ToolCall(tool="python", content=code, span=span)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its start and end."""
    if len(text) <= limit:
        return text
    half = limit // 2
    tail = text[len(text) - half:] if half else ""  # text[-0:] would be all of it
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{tail}"


def format_sandbox_result(
    result: SandboxResult, *, timeout: float, memory_mb: int, max_chars: int = 4000, stderr_lines: int = 20
) -> str:
    """The observation for a finished program: its stdout, the end of its stderr, and why it stopped."""
    parts = []
    if result.stdout:
        parts.append(_clip(result.stdout.rstrip("\n"), max_chars))
    stderr = result.stderr.rstrip("\n")
    if stderr:
        tail = "\n".join(stderr.splitlines()[-stderr_lines:])
        parts.append(f"[stderr]\n{_clip(tail, max_chars)}")
    if result.limit is not None:
        message = _LIMIT_MESSAGES.get(result.limit, f"the program hit the {result.limit} limit")
        parts.append(f"[stopped: {message.format(timeout=timeout, memory_mb=memory_mb)}]")
    elif result.exit_code not in (0, None):
        parts.append(f"[exit code {result.exit_code}]")
    if not parts:
        parts.append("[no output; print() what you want to see]")
    return "<output>\n" + "\n".join(parts) + "\n</output>"


class PythonTool:
    """Runs the first Python block of an action in the sandbox.

    Args:
        timeout: wall-clock seconds per program.
        memory_mb: memory limit per program (each process, and all of its processes together), in MiB.
        mode: sandbox mode, ``"bwrap"`` (default) or ``"process"`` (weaker, must be chosen explicitly);
            None reads ``$GEM_SANDBOX``. Checked here, so a machine without the sandbox fails at setup
            instead of mid-training.
        max_chars: observation length kept from stdout (start and end).
        sandbox_backend: ``"local"`` or ``"ray"`` (programs run on Ray nodes labelled ``gem_sandbox``,
            :mod:`gem_core.tools.sandbox.ray_pool`); None reads ``$GEM_SANDBOX_BACKEND`` (default local).

    Raises:
        InvalidArgument: if ``timeout`` is not a finite number of seconds above 0, ``memory_mb`` not a whole number
            of at least the sandbox's :data:`~gem_core.tools.sandbox.pool.MIN_MEMORY_MB`, ``max_chars`` not a whole
            number of at least 1, or ``mode`` or ``sandbox_backend`` is unknown.
        SandboxUnavailableError: if ``mode`` cannot run on this machine (local backend).
    """

    name = "python"
    #: Only the first block of an action runs (:func:`find_python_block`); :class:`~gem_core.wrappers.tools.ToolUse`
    #: answers a native call beyond it as not run.
    max_calls_per_action = 1
    #: The argument of a native call that holds the program (:meth:`content_from_arguments`).
    argument_name = "code"

    def __init__(
        self, *, timeout: float = 5.0, memory_mb: int = 512, mode: str | None = None, max_chars: int = 4000,
        sandbox_backend: str | None = None,
    ):
        # Checked here: a text or a negative limit would otherwise fail every program during training.
        self.timeout = check_amount("PythonTool: timeout", timeout, "seconds")
        self.memory_mb = check_memory_mb("PythonTool: memory_mb", memory_mb)  # the sandbox's own rule (>= 16 MiB)
        self.max_chars = check_count("PythonTool: max_chars", max_chars)
        self.backend = resolve_backend(sandbox_backend)
        # On Ray the sandbox nodes check the mode; this machine (a GPU node) need not have bubblewrap.
        self.mode = resolve_mode(mode) if self.backend == "local" else (mode or mode_from_environment())

    @property
    def max_call_seconds(self) -> float:
        """The longest one call may take: the program's timeout plus the sandbox's start and report
        (:attr:`gem_core.env.Env.max_step_seconds` of a tool env is built from it)."""
        return self.timeout + 2.0

    @property
    def instruction(self) -> str:
        """How to write code for the tool, for the task prompt."""
        return (
            "You can run Python code: write it inside <python>...</python> (or a ```python fenced block). "
            "The first block in your reply runs in a fresh sandbox without network access, and what it prints "
            "comes back to you."
        )

    def parse(self, action: str) -> list[ToolCall]:
        """The first ``<python>`` (or fenced ```` ```python ````) block in ``action``, as a one-call list; empty if none."""
        call = find_python_block(action)
        return [] if call is None else [call]

    def content_from_arguments(self, arguments: dict[str, Any]) -> str:
        """The program of a native call (``ToolUse(call_format=...)``): its ``code`` argument, which must be text.

        Raises:
            InvalidArgument: as :func:`~gem_core.tools.tool.text_argument`.
        """
        return text_argument(arguments, self.argument_name, "the program")

    def _result(self, result: SandboxResult) -> ToolResult:
        observation = format_sandbox_result(result, timeout=self.timeout, memory_mb=self.memory_mb, max_chars=self.max_chars)
        info = {
            "sandbox_mode": result.mode,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "limit": result.limit,
            "duration": result.duration,
        }
        if result.node is not None:
            info["sandbox_node"] = result.node
        return ToolResult(observation, result.ok, info)

    def execute(self, call: ToolCall) -> ToolResult:
        """Run the code in a fresh sandbox; its output (or timeout, or limit broken) is the observation."""
        return self._result(run_python(call.content, timeout=self.timeout, memory_mb=self.memory_mb, mode=self.mode, backend=self.backend))

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """:meth:`execute` without blocking the event loop."""
        result = await arun_python(
            call.content, timeout=self.timeout, memory_mb=self.memory_mb, mode=self.mode, backend=self.backend
        )
        return self._result(result)

    def close(self) -> None:
        """Nothing to release: each run's sandbox ends with the run (the :class:`~gem_core.tools.tool.Tool` contract)."""
