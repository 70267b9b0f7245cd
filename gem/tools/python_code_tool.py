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

import re

from gem.tools.base_tool import GemToolMethods
from gem_core.errors import InvalidArgument
from gem_core.tools.python import PythonTool, format_sandbox_result
from gem_core.tools.sandbox import SandboxResult
from gem_core.tools.tags import tag_spans
from gem_core.tools.tool import ToolCall, ToolResult

__all__ = ["PythonCodeTool"]

_MODES = {"none": None, "bwrap": "bwrap"}

# The opener of GEM's fenced block, ```\n?python(.*?)```: "```", an optional newline, "python" and whatever
# follows it on the line (```python3 and an inline ```python print(1)``` are code to GEM; ```py is not).
_GEM_FENCE_OPENER = re.compile(r"```\n?python")


GEM_INSTRUCTION = (
    "Solve the above problem step by step. You now have the ability to selectively write "
    "executable Python code to enhance your reasoning process. The Python code will be executed by an external sandbox, "
    'and the output (after "Code execution result: ") is returned to aid your reasoning and help you arrive at the final answer. '
    "The Python code should be complete scripts, including necessary imports, wrapped within <python>...</python> tags or using ```python...``` code block. "
    "Return your final answer within \\boxed{}."
)


class PythonCodeTool(GemToolMethods, PythonTool):
    """Runs an action's Python block, found as GEM finds it (:meth:`parse`), in the sandbox.

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

    def parse(self, action: str) -> list[ToolCall]:
        """GEM's choice of block: of the first ``<python>...</python>`` and the first fenced block opened by
        ```` ```python ```` (or ```` ```\\npython ````), the one that ends first, its code stripped, so the same
        replies run as under GEM (the core's :class:`~gem_core.tools.python.PythonTool` keeps its own rules).

        Returns:
            The block as a one-call list (its span ends where GEM's ``parsed_action`` does), or empty if none.
        """
        if not isinstance(action, str):
            return []
        found: list[tuple[int, int, str]] = []  # (start, end, code)
        tagged = next(tag_spans(action, "<python>", "</python>"), None)  # GEM's first <python>(.*?)</python>
        if tagged is not None:
            found.append((tagged.start, tagged.end, tagged.body(action)))
        opener = _GEM_FENCE_OPENER.search(action)
        if opener is not None:
            # the first opener with a closer after it is the first one: an opener without one leaves none for a later
            close = action.find("```", opener.end())
            if close >= 0:
                found.append((opener.start(), close + 3, action[opener.end() : close]))
        if not found:
            return []
        start, end, code = min(found, key=lambda block: block[1])  # GEM's earliest end (two blocks never end together)
        return [ToolCall(tool=self.name, content=code.strip(), span=(start, end))]

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
