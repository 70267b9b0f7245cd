"""GEM's Python tool text under ``import gem``: the instruction, "Code execution result: ..." answers and
the tool-limit notice, as GEM (4069f2f) writes them, plus GEM's ``parsed_action``/``tool_type`` info.
Expected strings are GEM's own output for the same actions (checked side by side)."""

from __future__ import annotations

from ci_guard import needs

import gem


def python_sandbox_usable() -> bool:
    from gem_core.tools import sandbox

    return "bwrap" in sandbox.available_modes()

GEM_INSTRUCTION = (
    "Solve the above problem step by step. You now have the ability to selectively write executable Python code to "
    "enhance your reasoning process. The Python code will be executed by an external sandbox, and the output (after "
    '"Code execution result: ") is returned to aid your reasoning and help you arrive at the final answer. The Python '
    "code should be complete scripts, including necessary imports, wrapped within <python>...</python> tags or using "
    "```python...``` code block. Return your final answer within \\boxed{}."
)


@needs(python_sandbox_usable(), "the Python tool's sandbox (bubblewrap) cannot run here")
def test_the_python_tool_speaks_gems_text() -> None:
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    raw = gem.make("game:GuessTheNumber-v0-easy")
    intro, _ = raw.reset(seed=0)
    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=[PythonCodeTool(timeout=2)], max_tool_uses=2)
    first, _ = env.reset(seed=0)
    assert first == intro + "\n" + GEM_INSTRUCTION
    shown, _, _, _, info = env.step("think <python>print(6*7)</python> more")
    assert shown == "Code execution result: 42\n\n"
    assert info["parsed_action"] == "think <python>print(6*7)</python>" and info["tool_type"] == "python_code"
    shown, *_ = env.step("<python>1/0</python>")
    assert shown.startswith("Code execution result: Traceback (most recent call last):\n")
    assert shown.endswith("ZeroDivisionError: division by zero\n\n\nReached the maximum number of tool use. Please output final answer directly.")
