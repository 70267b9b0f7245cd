"""Tool-call parsing in one pass (issue 14, bounded work on every path).

The tag parsers were ``<tag>(.*?)</tag>`` regexes, which rescan the rest of the action from every
unclosed opener: 160 KB of ``<python>`` took 20 s, of ``<search>`` 21 s, of ``<tool_call>{`` 60 s (hermes),
288 KB of DeepSeek call openers 45 s; a 1 MB action, hours. The old regexes are kept here as oracles for
what the parsers must still find.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core.tools.calls import parse_native_calls
from gem_core.tools.mcp import parse_tool_calls
from gem_core.tools.python import find_python_block
from gem_core.tools.search import SearchTool
from gem_core.tools.tags import tag_spans

OLD_PYTHON = (re.compile(r"<python>(.*?)</python>", re.DOTALL), re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL))
OLD_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
OLD_DEEPSEEK = re.compile(
    r"<｜tool▁call▁begin｜>\s*(?:function)?\s*<｜tool▁sep｜>\s*([^\n]+?)\s*\n\s*```(?:json)?\s*(.*?)\s*```\s*<｜tool▁call▁end｜>",
    re.DOTALL,
)

PIECES = ["<python>", "</python>", "<search>", "</search>", "<tool_call>", "</tool_call>", "```python\n", "```",
          "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "function", "json", "\n", " ", "x",
          '{"name": "f", "arguments": {}}', "{}", "<"]  # fmt: skip
ACTIONS = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(ACTIONS)
def test_tag_spans_find_what_the_lazy_regex_found(text):
    for open_tag, close_tag in (("<python>", "</python>"), ("<search>", "</search>"), ("<tool_call>", "</tool_call>")):
        expected = [(m.start(), m.start(1), m.end(1), m.end()) for m in re.finditer(f"{re.escape(open_tag)}(.*?){re.escape(close_tag)}", text, re.DOTALL)]
        assert [tuple(span) for span in tag_spans(text, open_tag, close_tag)] == expected


@settings(max_examples=500, deadline=None)
@given(ACTIONS)
def test_the_python_block_is_the_one_the_regexes_found(text):
    matches = [m for m in (pattern.search(text) for pattern in OLD_PYTHON) if m]
    call = find_python_block(text)
    if not matches:
        assert call is None
        return
    first = min(matches, key=lambda m: m.start())
    code = first.group(1)
    inner = OLD_PYTHON[1].search(code)
    if inner and code.strip().startswith("```"):
        code = inner.group(1)
    assert (call.span, call.content) == (first.span(), code)


@settings(max_examples=500, deadline=None)
@given(ACTIONS)
def test_hermes_calls_are_the_ones_the_regex_found(text):
    found = parse_native_calls("hermes", text)
    assert [call.span for call in found] == [m.span() for m in OLD_HERMES.finditer(text)]


@pytest.mark.parametrize(
    "text",
    [
        '<｜tool▁call▁begin｜>function<｜tool▁sep｜>python\n```json\n{"code": "print(1)"}\n```<｜tool▁call▁end｜>',
        '<｜tool▁call▁begin｜> <｜tool▁sep｜>  search \n\n ```\n{"query": "a ``` b"}  ```\n<｜tool▁call▁end｜>',
        '<｜tool▁call▁begin｜>function<｜tool▁sep｜>python```json{}```<｜tool▁call▁end｜>',  # no newline: not a call
        '<｜tool▁call▁begin｜>fn<｜tool▁sep｜>python\n```json\n{}\n```<｜tool▁call▁end｜>',  # not "function": not a call
    ],
)
def test_deepseek_calls_are_the_ones_the_regex_found(text):
    expected = [(m.group(1), json.loads(m.group(2)), m.span()) for m in OLD_DEEPSEEK.finditer(text)]
    assert [(c.name, c.arguments, c.span) for c in parse_native_calls("deepseek_v3", text)] == expected


FLOODS = {
    "python": (lambda a: find_python_block(a), "<python>"),
    "search": (SearchTool("http://127.0.0.1:9/retrieve").parse, "<search>"),
    "mcp": (parse_tool_calls, "<tool_call>"),
    "hermes": (lambda a: parse_native_calls("hermes", a), "<tool_call>{"),
    "deepseek_v3": (lambda a: parse_native_calls("deepseek_v3", a), "<｜tool▁call▁begin｜><｜tool▁sep｜>x\n```"),
}


@pytest.mark.parametrize("name", sorted(FLOODS))
def test_a_megabyte_of_unclosed_openers_is_one_pass(name):
    parse, opener = FLOODS[name]
    action = opener * (1_000_000 // len(opener))
    start = time.perf_counter()
    assert not parse(action)
    # Minutes to hours before (quadratic); a tool env's whole step is allowed a few seconds.
    assert time.perf_counter() - start < 2.0
