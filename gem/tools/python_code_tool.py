"""``gem.tools.python_code_tool.PythonCodeTool``: the core's Python tool
(:class:`gem_core.tools.python.PythonTool`) with GEM's constructor.

GEM's default ``sandbox_type="none"`` runs programs as plain subprocesses. Here every program runs in the
core's sandbox: ``"none"`` means the core's default mode (``$GEM_SANDBOX``, else bubblewrap), and
``"bwrap"`` asks for bubblewrap explicitly. ``keep_error_last_line=True`` keeps only the last line of a
failing program's stderr, as in GEM.

The model sees GEM's text: GEM's instruction and ``Code execution result: <stdout>[\n<stderr>]\n`` answers
(a timeout as GEM words it), so prompts match GEM's. The run itself (sandbox, limits) is the core's.
"""

from __future__ import annotations

from gem.tools.base_tool import GemToolMethods
from gem_core.errors import InvalidArgument
from gem_core.tools.python import PythonTool, format_sandbox_result
from gem_core.tools.sandbox import SandboxResult
from gem_core.tools.tool import ToolResult

__all__ = ["PythonCodeTool"]

_MODES = {"none": None, "bwrap": "bwrap"}


GEM_INSTRUCTION = (
    "Solve the above problem step by step. You now have the ability to selectively write "
    "executable Python code to enhance your reasoning process. The Python code will be executed by an external sandbox, "
    'and the output (after "Code execution result: ") is returned to aid your reasoning and help you arrive at the final answer. '
    "The Python code should be complete scripts, including necessary imports, wrapped within <python>...</python> tags or using ```python...``` code block. "
    "Return your final answer within \\boxed{}."
)


class PythonCodeTool(GemToolMethods, PythonTool):
    """Runs the first ``<python>...</python>`` or fenced Python block of an action in the sandbox.

    Args:
        timeout: Seconds a program may run; a program stopped there is answered with GEM's timeout text.
        sandbox_type: ``"none"`` (the core's default sandbox mode: ``$GEM_SANDBOX``, else bubblewrap) or ``"bwrap"``.
        keep_error_last_line: Show only the last line of a failing program's stderr, as GEM does.

    Raises:
        InvalidArgument: ``sandbox_type`` is not ``"none"`` or ``"bwrap"``.
    """

    tool_type = "python_code"

    @property
    def instruction(self) -> str:
        """GEM's instruction text for the tool, so prompts match GEM's."""
        return GEM_INSTRUCTION

    def __init__(self, timeout: float = 5, sandbox_type: str = "none", keep_error_last_line: bool = False):
        if sandbox_type not in _MODES:
            raise InvalidArgument(
                f"PythonCodeTool(sandbox_type={sandbox_type!r}): expected one of {sorted(_MODES)}; "
                "programs always run in the core's sandbox (see gem_core.tools.sandbox)."
            )
        super().__init__(timeout=timeout, mode=_MODES[sandbox_type])
        self.keep_error_last_line = keep_error_last_line

    def _result(self, result: SandboxResult) -> ToolResult:
        answer = super()._result(result)  # ok and info are the core's
        stdout, stderr = result.stdout, result.stderr.strip()  # GEM strips stderr, not stdout
        if result.limit == "time":
            stderr = f"\nExecution timed out after {self.timeout:g} seconds."  # GEM's words for a timeout
        elif result.limit is not None:
            # GEM has no other limits; say which one stopped the program, in the core's words
            stderr = (stderr + "\n" if stderr else "") + format_sandbox_result(
                result, timeout=self.timeout, memory_mb=self.memory_mb, max_chars=self.max_chars, stderr_lines=0
            ).removeprefix("<output>\n").removesuffix("\n</output>")
        if stderr and self.keep_error_last_line:
            stderr = stderr.rstrip("\n").split("\n")[-1]
        shown = f"{stdout}\n{stderr}" if stderr else stdout
        return ToolResult("Code execution result: " + shown.lstrip(" \n") + "\n", answer.ok, answer.info)
