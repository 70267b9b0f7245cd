"""``gem.tools.python_code_tool.PythonCodeTool``: the core's Python tool
(:class:`gem_core.tools.python.PythonTool`) with GEM's constructor.

GEM's default ``sandbox_type="none"`` runs programs as plain subprocesses. Here every program runs in the
core's sandbox: ``"none"`` means the core's default mode (``$GEM_SANDBOX``, else bubblewrap), and
``"bwrap"`` asks for bubblewrap explicitly. ``keep_error_last_line=True`` keeps only the last line of a
failing program's stderr, as in GEM.
"""

from __future__ import annotations

from gem.tools.base_tool import GemToolMethods
from gem_core.errors import InvalidArgument
from gem_core.tools.python import PythonTool, format_sandbox_result
from gem_core.tools.sandbox import SandboxResult
from gem_core.tools.tool import ToolResult

__all__ = ["PythonCodeTool"]

_MODES = {"none": None, "bwrap": "bwrap"}


class PythonCodeTool(GemToolMethods, PythonTool):
    """Runs the first ``<python>...</python>`` or fenced Python block of an action in the sandbox."""

    tool_type = "python_code"

    def __init__(self, timeout: float = 5, sandbox_type: str = "none", keep_error_last_line: bool = False):
        if sandbox_type not in _MODES:
            raise InvalidArgument(
                f"PythonCodeTool(sandbox_type={sandbox_type!r}): expected one of {sorted(_MODES)}; "
                "programs always run in the core's sandbox (see gem_core.tools.sandbox)."
            )
        super().__init__(timeout=timeout, mode=_MODES[sandbox_type])
        self.keep_error_last_line = keep_error_last_line

    def _result(self, result: SandboxResult) -> ToolResult:
        answer = super()._result(result)
        if not self.keep_error_last_line:
            return answer
        observation = format_sandbox_result(
            result, timeout=self.timeout, memory_mb=self.memory_mb, max_chars=self.max_chars, stderr_lines=1
        )
        return ToolResult(observation, answer.ok, answer.info)
