"""``math:<Dataset>-python``: the math env with the Python tool, so the model may compute before it answers.

An action with a ``<python>`` / fenced block runs in the sandbox and its output is the next observation;
an action without one is the final answer (see :class:`gem_core.wrappers.tools.ToolUse`).
"""

from __future__ import annotations

from typing import Any

from gem_core.envs.math.env import MathEnv
from gem_core.registry import forwards_kwargs

__all__ = ["make_math_with_python"]


@forwards_kwargs(MathEnv)
def make_math_with_python(
    *,
    max_tool_calls: int = 5,
    python_timeout: float = 5.0,
    python_memory_mb: int = 512,
    sandbox_mode: str | None = None,
    **env_kwargs: Any,
):
    """A :class:`MathEnv` (built from ``env_kwargs``) wrapped with :class:`~gem_core.tools.python.PythonTool`.

    Args:
        max_tool_calls: programs the agent may run per episode; after that its reply is graded.
        python_timeout: the sandbox's time limit per program, in seconds.
        python_memory_mb: the sandbox's memory limit per program, in MiB.
        sandbox_mode: ``"bwrap"``, ``"process"`` or ``None`` (``$GEM_SANDBOX``, else bwrap).
    """
    from gem_core.tools.python import PythonTool
    from gem_core.wrappers.tools import ToolUse

    tool = PythonTool(timeout=python_timeout, memory_mb=python_memory_mb, mode=sandbox_mode)
    return ToolUse(MathEnv(**env_kwargs), [tool], max_tool_calls=max_tool_calls)
