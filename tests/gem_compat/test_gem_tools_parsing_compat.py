"""GEM 0.1.0's tool-call selection, Python block parsing and ``gem.utils`` helpers under ``import gem``.

Expected values are gem-llm 0.1.0's (its ``tool_env_wrapper``, ``python_code_tool``, ``search_tool``,
``utils.parsing`` and ``utils.constants``, run in its own virtualenv; ``tests/gem_upstream`` checks the
pure parts side by side). The core's own tools keep their behaviour; only ``gem``'s differ.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ci_guard import needs

import gem
from gem_core.tools.tool import ToolCall, ToolResult


def python_sandbox_usable() -> bool:
    from gem_core.tools import sandbox

    return "bwrap" in sandbox.available_modes()


# --- 1. one tool call per action -------------------------------------------------------------------


def test_gem_search_tool_runs_one_search_per_action(retrieval_server) -> None:
    """Before the fix, gem's SearchTool ran every <search> of an action: "<search>a</search><search>b</search>"
    under WRAPPER_FACTORY["search_tool"] paid 0.6 with tool_use_counter 2; GEM runs the first only (0.3, 1)."""
    from gem.tools.search_tool import SearchTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    tool = SearchTool(search_url=retrieval_server.url)
    assert tool.max_calls_per_action == 1
    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=[tool], tool_reward=0.3, max_tool_uses=5)
    env.reset(seed=3)
    observation, reward, terminated, _, info = env.step("<search>python</search> then <search>list</search>")
    assert (reward, info["tool_use_counter"], terminated) == (0.3, 1, False)
    assert info["parsed_action"] == "<search>python</search>"
    assert observation.count("<information>") == 1


class FakeTool:
    """A tool for ``<name>...</name>`` whose runs are recorded; ``fails`` makes each run fail."""

    def __init__(self, name: str, fails: bool = False) -> None:
        self.name = name
        self.fails = fails
        self.runs: list[str] = []
        self.instruction = f"use <{name}>"

    def parse(self, action: str) -> list[ToolCall]:
        calls, start = [], 0
        while (begin := action.find(f"<{self.name}>", start)) >= 0 and (stop := action.find(f"</{self.name}>", begin)) >= 0:
            end = stop + len(self.name) + 3
            calls.append(ToolCall(self.name, action[begin + len(self.name) + 2 : stop], (begin, end)))
            start = end
        return calls

    def execute(self, call: ToolCall) -> ToolResult:
        self.runs.append(call.content)
        return ToolResult(f"{self.name}:{call.content}", not self.fails)

    async def aexecute(self, call: ToolCall) -> ToolResult:
        return self.execute(call)

    def close(self) -> None:
        pass


def _wrapped(*tools: FakeTool) -> Any:
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=list(tools), tool_reward=0.5, tool_success_reward=0.25)
    env.reset(seed=3)
    return env


@pytest.mark.parametrize("use_async", [False, True])
def test_gem_tool_wrapper_runs_the_first_listed_tool_that_parses(use_async: bool) -> None:
    """Before the fix, every call of every tool ran, in order of appearance (reward 1.5, counter 2, both observations);
    GEM tries its tools in list order and stops at the first that parses and runs cleanly."""
    first, second = FakeTool("a"), FakeTool("b")
    env = _wrapped(first, second)
    action = "<b>x</b> <a>y</a> <a>z</a>"
    result = asyncio.run(asyncio.wait_for(env.astep(action), 10)) if use_async else env.step(action)
    observation, reward, terminated, _, info = result
    assert (observation, reward, terminated) == ("a:y", 0.75, False)
    assert (first.runs, second.runs) == (["y"], [])
    assert info["tool_use_counter"] == 1 and info["tool_success_counter"] == 1
    assert info["parsed_action"] == "<b>x</b> <a>y</a>" and info["tool_type"] == "a"


def test_gem_tool_wrapper_tries_the_next_tool_after_a_failed_one() -> None:
    """Before the fix, both calls ran and were both reported (reward 1.0, counter 2); in GEM a failed call
    hands over to the next tool, whose result is the step's (reward 0.75, counter 1)."""
    first, second = FakeTool("a", fails=True), FakeTool("b")
    env = _wrapped(first, second)
    observation, reward, _, _, info = env.step("<a>1</a><b>2</b>")
    assert (observation, reward) == ("b:2", 0.75)
    assert (first.runs, second.runs) == (["1"], ["2"])
    assert info["tool_use_counter"] == 1 and info["tool_success_counter"] == 1


def test_gem_tool_wrapper_passes_on_when_the_last_tool_tried_finds_no_call() -> None:
    """Before the fix, the failed call was answered as a tool step (reward 0.5, counter 1); GEM keeps only the
    last tool's verdict, so a failed call followed by a tool that finds none sends the action to the env."""
    first, second = FakeTool("a", fails=True), FakeTool("b")
    env = _wrapped(first, second)
    observation, reward, terminated, _, info = env.step("<a>1</a>")
    assert first.runs == ["1"] and second.runs == []
    assert info["tool_use_counter"] == 0 and terminated  # the game's answer to a malformed guess
    assert "did not provide a valid guess" in observation


# --- 2. GEM's Python code blocks -------------------------------------------------------------------

GEM_PYTHON_BLOCKS = {  # action -> (code GEM runs, GEM's parsed_action), or None when GEM finds no block
    "```py\nprint(11)\n```": None,
    "```python3\nprint(13)\n```": ("3\nprint(13)", "```python3\nprint(13)\n```"),
    "```python print(22)``` after": ("print(22)", "```python print(22)```"),
    "<python>\n\n  print(23)</python>": ("print(23)", "<python>\n\n  print(23)</python>"),
    "```\npython\nprint(1)\n```": ("print(1)", "```\npython\nprint(1)\n```"),
    # the block that ends first wins
    "<python>print(1)\n```python\nprint(2)\n```</python>": ("print(2)", "<python>print(1)\n```python\nprint(2)\n```"),
    "```python\nprint(3)\n``` <python>print(4)</python>": ("print(3)", "```python\nprint(3)\n```"),
    "<python>print(5)</python> ```python\nprint(6)\n```": ("print(5)", "<python>print(5)</python>"),
    "<python>print(7)": None,
    "```python\nprint(8)": None,
}


@needs(python_sandbox_usable(), "the Python tool's sandbox (bubblewrap) cannot run here")
@pytest.mark.parametrize("action", list(GEM_PYTHON_BLOCKS))
def test_gem_python_tool_finds_gems_code_blocks(action: str) -> None:
    """Before the fix, gem's PythonCodeTool used the core's patterns: ```py ran, ```python3 and inline
    ```python print(22)``` did not, and "<python>\\n\\n  print(23)</python>" kept its indentation."""
    from gem.tools.python_code_tool import PythonCodeTool

    calls = PythonCodeTool().parse(action)
    expected = GEM_PYTHON_BLOCKS[action]
    if expected is None:
        assert calls == []
    else:
        assert [(call.content, action[: call.span[1]]) for call in calls] == [expected]


@needs(python_sandbox_usable(), "the Python tool's sandbox (bubblewrap) cannot run here")
@pytest.mark.parametrize(
    "action, expected",
    [
        ("```py\nprint(11)\n```", (-0.1, True)),
        ("```python3\nprint(13)\n```", (0.3, False)),
        ("```python print(22)```", (0.3, False)),
        ("<python>\n\n  print(23)</python>", (0.3, False)),
    ],
)
def test_gem_python_tool_rewards_as_gem(action: str, expected: tuple[float, bool]) -> None:
    """Before the fix, these steps paid (0.3, False), (-0.1, True), (-0.1, True) and (0.05, False): the
    wrong blocks ran (or an IndentationError), unlike gem-llm 0.1.0."""
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=[PythonCodeTool(timeout=5)],
                         tool_reward=0.05, tool_success_reward=0.25, max_tool_uses=5)
    env.reset(seed=3)
    _, reward, terminated, _, _ = env.step(action)
    assert (round(float(reward), 6), bool(terminated)) == expected


def test_core_python_tool_keeps_its_own_blocks() -> None:
    """The core's tool is unchanged by gem's override: it still takes ```py and keeps the code as written."""
    from gem_core.tools.python import find_python_block

    found = find_python_block("```py\nprint(11)\n```")
    assert found is not None and found.content == "print(11)\n"
    assert find_python_block("```python3\nprint(13)\n```") is None


# --- 3 and 4. gem.utils --------------------------------------------------------------------------------

GEM_BOXED = {
    "\\boxed{ 5 }": " 5 ",
    "\\fbox{3}": None,
    "\\boxed{1} and \\boxed{": None,
    "\\boxed {7}": None,
    "\\boxed{\n4\n}": "\n4\n",
    "\\boxed{\\frac{1}{2}}": "\\frac{1}{2}",
    "\\boxed{1} \\boxed{2}": "2",
    "no box": None,
    "\\boxed{}": "",
    "\\boxed}{x}": None,
    "\\fbox{1} \\boxed{2": None,
    "\\boxed{a}} tail": "a",
}


@pytest.mark.parametrize("text", list(GEM_BOXED))
def test_gem_extract_last_boxed_answer_is_gems(text: str) -> None:
    """Before the fix, this was the core's extractor: '\\boxed{ 5 }' gave '5' (GEM ' 5 '), '\\fbox{3}' gave '3'
    (GEM None), an unclosed last \\boxed fell back to an earlier one, and '\\boxed {7}' gave '7' (GEM None)."""
    from gem.utils.parsing import extract_last_boxed_answer

    assert extract_last_boxed_answer(text) == GEM_BOXED[text]


def test_gem_boxed_helpers_are_gems() -> None:
    """Before the fix, gem.utils.parsing had no last_boxed_only_string / remove_boxed (GEM's building blocks)."""
    from gem.utils.parsing import last_boxed_only_string, remove_boxed

    assert last_boxed_only_string("x \\fbox{3} y") == "\\fbox{3}"
    assert last_boxed_only_string("\\boxed{1} \\boxed{") is None
    assert remove_boxed("\\boxed{2}") == "2" and remove_boxed("\\fbox{2}") is None and remove_boxed(None) is None


def test_gem_extract_last_tagged_answer_is_gems() -> None:
    """Before the fix, importing extract_last_tagged_answer from gem.utils.parsing raised ImportError."""
    from gem.utils.parsing import extract_last_tagged_answer

    assert extract_last_tagged_answer("<answer> a </answer> then <answer>\n b \n</answer>") == "b"
    assert extract_last_tagged_answer("<answer>x") is None
    assert extract_last_tagged_answer("<answer></answer>") == ""


def test_gem_extract_code_from_model_is_gems() -> None:
    """Before the fix, importing extract_code_from_model from gem.utils.parsing raised ImportError."""
    from gem.utils.parsing import extract_code_from_model

    assert extract_code_from_model("```python\nx = 1\n```\n```cpp\n int y; \n```") == "int y;"
    assert extract_code_from_model("```\nplain\n```") == "plain"
    assert extract_code_from_model("```python x = 1```") is None
    assert extract_code_from_model("no code") is None


def test_gem_language_game_reward_is_gems() -> None:
    """Before the fix, importing LanguageGameReward from gem.utils.constants raised ImportError."""
    from gem.utils.constants import LanguageGameReward

    assert (
        LanguageGameReward.success_reward,
        LanguageGameReward.internal_step_reward,
        LanguageGameReward.fail_reward,
        LanguageGameReward.invalid_action_reward,
        LanguageGameReward.format_error_reward,
    ) == (1.0, 0.0, 0.0, 0.0, -0.1)
