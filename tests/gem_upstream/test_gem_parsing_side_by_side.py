"""GEM 0.1.0's text parsers and ``import gem``'s give the same answers on the same texts.

GEM's ``gem.utils.parsing`` extractors, its ``PythonCodeTool``/``SearchTool`` choice of call (code or query,
and ``parsed_action``) and its ``LanguageGameReward`` levels run in GEM's own virtualenv (a subprocess, as
in ``test_side_by_side.py``: both packages are named ``gem``); this project's run here. The texts are
hand-picked edge cases plus seeded random mixes of the tokens the parsers look for.
"""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest
from ci_guard import needs

HAND_PICKED = [
    "\\boxed{ 5 }", "\\fbox{3}", "\\boxed{1} and \\boxed{", "\\boxed {7}", "\\boxed{\n4\n}", "\\boxed{\\frac{1}{2}}",
    "\\boxed}{x}", "\\fbox{1} \\boxed{2", "```py\nprint(11)\n```", "```python3\nprint(13)\n```", "```python print(22)```",
    "<python>\n\n  print(23)</python>", "```\npython\nprint(1)\n```", "<python>a\n```python\nb\n```</python>",
    "<answer> a </answer><answer>\n b \n</answer>", "<answer>x", "```cpp\n int y; \n```", "```python x```",
    "<search> q </search><search>r</search>", "<search></search>", "<search>open", "",
]
TOKENS = ["\\boxed", "\\fbox", "{", "}", " ", "\n", "x", "1", "<answer>", "</answer>", "```", "python", "py", "3",
          "<python>", "</python>", "<search>", "</search>", "print(1)", "cpp"]


def _texts() -> list[str]:
    draw = random.Random(20250101)
    return HAND_PICKED + ["".join(draw.choice(TOKENS) for _ in range(draw.randint(1, 14))) for _ in range(400)]


# Run under GEM's interpreter: reads texts (JSON) on stdin, writes GEM's answers (JSON) on stdout.
GEM_SIDE = """
import json, sys, types
try:
    import requests
except ImportError:  # not among gem-llm's dependencies; its search tool imports it only to send queries
    sys.modules["requests"] = types.ModuleType("requests")
from gem.utils import parsing
from gem.utils.constants import LanguageGameReward
from gem.tools.python_code_tool import PythonCodeTool
from gem.tools.search_tool import SearchTool
python, search = PythonCodeTool(), SearchTool(search_url="http://127.0.0.1:9/retrieve")
def first(parsed):
    content, parsed_action, valid = parsed
    return [content, parsed_action] if valid else None
out = {"rows": [], "reward": [getattr(LanguageGameReward, name) for name in sys.argv[1:]]}
for text in json.load(sys.stdin):
    out["rows"].append([parsing.extract_last_boxed_answer(text), parsing.extract_last_tagged_answer(text),
                        parsing.extract_code_from_model(text), first(python._parse_action(text)),
                        first(search._parse_action(text))])
print(json.dumps(out))
"""
REWARD_NAMES = ["success_reward", "internal_step_reward", "fail_reward", "invalid_action_reward", "format_error_reward"]


def _gem_answers(texts: list[str], cwd: str) -> dict:
    python = os.environ.get("GEM_UPSTREAM_PYTHON")
    if not python:
        pytest.skip("needs GEM 0.1.0 in its own virtualenv: run `nox -s gem_upstream`")
    done = subprocess.run([python, "-c", GEM_SIDE, *REWARD_NAMES], input=json.dumps(texts), capture_output=True,
                          text=True, timeout=120, cwd=cwd)  # cwd: not this checkout, whose gem/ would shadow GEM's
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _sandbox_usable() -> bool:
    from gem_core.tools import sandbox

    return "bwrap" in sandbox.available_modes()


@needs(_sandbox_usable(), "gem's PythonCodeTool needs the sandbox (bubblewrap) to be built")
def test_parsers_answer_as_gems(tmp_path) -> None:
    """Before the fix, gem's extract_last_boxed_answer was the core's (stripped, took \\fbox, fell back past an
    unclosed \\boxed), the tagged/code extractors were missing, the Python tool took other blocks and the search
    tool every query."""
    pytest.importorskip("httpx")
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.search_tool import SearchTool
    from gem.utils import parsing
    from gem.utils.constants import LanguageGameReward

    texts = _texts()
    gem_side = _gem_answers(texts, str(tmp_path))
    python, search = PythonCodeTool(), SearchTool(search_url="http://127.0.0.1:9/retrieve")

    def first(calls: list, text: str) -> list | None:
        return [calls[0].content, text[: calls[0].span[1]]] if calls else None

    ours = [
        [parsing.extract_last_boxed_answer(text), parsing.extract_last_tagged_answer(text),
         parsing.extract_code_from_model(text), first(python.parse(text), text), first(search.parse(text), text)]
        for text in texts
    ]
    differing = [(text, theirs, mine) for text, theirs, mine in zip(texts, gem_side["rows"], ours, strict=True) if theirs != mine]
    assert not differing, differing[:5]
    assert gem_side["reward"] == [getattr(LanguageGameReward, name) for name in REWARD_NAMES]
