"""Native tool-call formats: the call syntax each model family was post-trained on, one parser each.

:class:`~gem_core.wrappers.tools.ToolUse` finds GEM's own tags (``<python>...</python>``) by default.
Given ``call_format=`` it instead reads the family's native calls, and its answers are rendered by the
chat template in the family's ``tool`` role (``<tool_response>`` for Qwen, ``ipython`` for Llama 3.1):

- ``"hermes"`` (Qwen2.5, Qwen3, Hermes): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, any number;
- ``"llama3_json"`` (Llama 3.1/3.2): the whole message is ``{"name": ..., "parameters": {...}}``
  (optionally after ``<|python_tag|>``);
- ``"deepseek_v3"``: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```<｜tool▁call▁end｜>``;
- ``"mistral"`` (v0.3): ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]``. ``[TOOL_CALLS]`` is a
  control token that decoding with ``skip_special_tokens`` drops, so a message that is exactly such a
  JSON list is read as calls too.

:func:`call_format_for` picks the parser for a tokenizer: transformers' own response parsing
(``tokenizer.response_template`` read by ``transformers``' ``parse_response``, transformers >= 5) when the
tokenizer ships a response template, otherwise the family's format read from its chat template (None:
GEM tags). The per-family parsers here cover tokenizers without a response template (most published
ones today).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.tools.tags import tag_spans
from gem_core.transport.json_depth import nests_deeper_than

__all__ = [
    "CALL_FORMATS",
    "MAX_CALL_DEPTH",
    "CallParser",
    "NativeCall",
    "call_format_for",
    "format_instruction",
    "parse_native_calls",
    "response_template_parser",
]


@dataclass(frozen=True)
class NativeCall:
    """One native tool call: the tool's name, its arguments, where it is in the action, or why it is malformed."""

    name: str
    arguments: dict[str, Any]
    span: tuple[int, int]
    error: str | None = None


MAX_CALL_DEPTH = 100
"""The deepest nesting of arrays and objects a call may have (the call object itself counts one). Python's
``json`` recurses once per level: a kilobyte of brackets would exhaust the interpreter's stack, so
deeper text is refused before it is parsed, as a malformed call. No tool's arguments come near it.
"""


def _depth_error(what: str = "tool call") -> str:
    return f"{what} is nested more than {MAX_CALL_DEPTH} levels deep"


def _json_problem(exc: BaseException) -> str:
    """The part of a parse error the model can act on: Python's int-limit message goes on to name a
    ``sys`` setting, which is no advice to a model."""
    return str(exc).partition(":")[0] or type(exc).__name__


def _load_call(text: str, span: tuple[int, int], arguments_key: str = "arguments") -> NativeCall:
    if nests_deeper_than(text, MAX_CALL_DEPTH):
        return NativeCall("", {}, span, _depth_error())
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        return NativeCall("", {}, span, f"tool call is not valid JSON ({exc.msg} at char {exc.pos})")
    except (ValueError, RecursionError) as exc:  # a number past Python's int digit limit; the depth cap stops recursion
        return NativeCall("", {}, span, f"tool call is not valid JSON ({_json_problem(exc)})")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return NativeCall("", {}, span, 'tool call must be a JSON object with a "name" string')
    arguments = payload.get(arguments_key, payload.get("arguments", payload.get("parameters", {})))
    if isinstance(arguments, str):  # some models emit the arguments as a JSON string
        if nests_deeper_than(arguments, MAX_CALL_DEPTH - 1):
            return NativeCall(payload["name"], {}, span, _depth_error(f'"{arguments_key}"'))
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
        except (ValueError, RecursionError) as exc:
            return NativeCall(payload["name"], {}, span, f'"{arguments_key}" is not valid JSON ({_json_problem(exc)})')
    if not isinstance(arguments, dict):
        return NativeCall(payload["name"], {}, span, f'"{arguments_key}" must be a JSON object')
    return NativeCall(payload["name"], arguments, span)


def _parse_hermes(action: str) -> list[NativeCall]:
    return [_load_call(t.body(action).strip(), (t.start, t.end)) for t in tag_spans(action, "<tool_call>", "</tool_call>")]


def _parse_llama3_json(action: str) -> list[NativeCall]:
    if not isinstance(action, str):  # not text (None, bytes): no call; the env answers it as malformed
        return []
    start = action.find("<|python_tag|>")
    start = start + len("<|python_tag|>") if start >= 0 else 0
    body = action[start:].strip()
    if not (body.startswith("{") and body.endswith("}")):
        return []
    call = _load_call(body, (start, len(action)), arguments_key="parameters")
    return [call] if call.name or '"name"' in body else []


_DEEPSEEK_BEGIN, _DEEPSEEK_SEP, _DEEPSEEK_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


_DEEPSEEK_SHAPE = "write NAME on the line after <｜tool▁sep｜>, then the arguments in a ```json fence"


def _deepseek_name_and_arguments(body: str) -> tuple[str, str] | str | None:
    """``[function]<sep>NAME\n```json\nARGUMENTS\n````` split with string operations: the regex it
    replaces backtracked quadratically over long runs of openers or whitespace. None where the body is not
    a call at all; the error text where it names a call (``function<sep>`` and a line) but is malformed, so
    the model is told rather than its call taken for the answer."""
    head, sep, tail = body.partition(_DEEPSEEK_SEP)
    if not sep or head.strip() not in ("", "function"):
        return None
    name, newline, rest = tail.lstrip().partition("\n")
    name, fence = name.rstrip(), rest.strip()
    if not newline:
        return None
    if not name or name.startswith("```"):
        return f"the tool call has no tool name: {_DEEPSEEK_SHAPE}"
    if len(fence) < 6 or not (fence.startswith("```") and fence.endswith("```")):
        return f"the arguments of {name[:100]!r} are not in a ```json fence: {_DEEPSEEK_SHAPE}"
    arguments = fence[3:-3]
    return name, (arguments[4:] if arguments.startswith("json") else arguments).strip()


def _parse_deepseek_v3(action: str) -> list[NativeCall]:
    out = []
    for found in tag_spans(action, _DEEPSEEK_BEGIN, _DEEPSEEK_END):
        parts = _deepseek_name_and_arguments(found.body(action))
        if isinstance(parts, str):
            out.append(NativeCall("", {}, (found.start, found.end), parts))
        elif parts is not None:
            name, arguments = parts
            out.append(_load_call(json.dumps({"name": name})[:-1] + ', "arguments": ' + arguments + "}", (found.start, found.end)))
    return out


_MISTRAL_SHAPE = 'expected a JSON list of {"name", "arguments"} objects after [TOOL_CALLS]'


def _parse_mistral(action: str) -> list[NativeCall]:
    if not isinstance(action, str):  # not text (None, bytes): no call; the env answers it as malformed
        return []
    start = action.find("[TOOL_CALLS]")
    body = action[start + len("[TOOL_CALLS]") :] if start >= 0 else action
    stripped = body.strip()
    span = (max(start, 0), len(action))
    if not stripped.startswith("[") or (start < 0 and not stripped.endswith("]")):
        # The marker announces calls: what follows it, if not a list, is a malformed call, not the answer.
        return [NativeCall("", {}, span, _MISTRAL_SHAPE)] if start >= 0 else []
    if nests_deeper_than(stripped, MAX_CALL_DEPTH):
        return [NativeCall("", {}, span, _depth_error("tool call list"))] if start >= 0 else []
    try:
        payload = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return [NativeCall("", {}, span, f"tool call list is not valid JSON ({exc.msg})")] if start >= 0 else []
    except (ValueError, RecursionError) as exc:
        return [NativeCall("", {}, span, f"tool call list is not valid JSON ({_json_problem(exc)})")] if start >= 0 else []
    if not isinstance(payload, list) or not all(isinstance(c, dict) and "name" in c for c in payload):
        return [NativeCall("", {}, span, _MISTRAL_SHAPE)] if start >= 0 else []
    return [_load_call(json.dumps(c), span) for c in payload]


CALL_FORMATS: dict[str, Callable[[str], list[NativeCall]]] = {
    "hermes": _parse_hermes,
    "llama3_json": _parse_llama3_json,
    "deepseek_v3": _parse_deepseek_v3,
    "mistral": _parse_mistral,
}
"""Parser per native format name."""

_EXAMPLES = {
    "hermes": '<tool_call>\n{{"name": "{name}", "arguments": {{"{arg}": ...}}}}\n</tool_call>',
    "llama3_json": '{{"name": "{name}", "parameters": {{"{arg}": ...}}}} (as the whole message)',
    "deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{{\"{arg}\": ...}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "mistral": '[TOOL_CALLS] [{{"name": "{name}", "arguments": {{"{arg}": ...}}}}]',
}


CallParser = Callable[[str], list[NativeCall]]
"""A native-call parser: the action text in, its calls out (what :func:`response_template_parser` returns)."""


def parse_native_calls(call_format: str | CallParser, action: str) -> list[NativeCall]:
    """The calls in ``action`` written in ``call_format`` (a key of :data:`CALL_FORMATS`, or a parser).

    Raises:
        InvalidArgument: if ``call_format`` is not a known format name or a parser.
    """
    if callable(call_format):
        return call_format(action)
    try:
        parser = CALL_FORMATS[call_format]
    except KeyError:
        raise InvalidArgument(f"call_format={call_format!r}: expected one of {sorted(CALL_FORMATS)} (or None for GEM tags).") from None
    return parser(action)


def format_instruction(call_format: str | CallParser, name: str, argument: str) -> str:
    """One line showing how to call tool ``name`` with its main ``argument`` in ``call_format``."""
    if callable(call_format):
        return f'your tool-call format, with name "{name}" and arguments {{"{argument}": ...}}'
    return _EXAMPLES[call_format].format(name=name, arg=argument)


def response_template_parser(tokenizer: Tokenizer) -> CallParser | None:
    """transformers' response parsing for ``tokenizer`` (its ``response_template``), None if it has none."""
    spec = getattr(tokenizer, "response_template", None)
    if spec is None:
        return None
    from transformers.utils.chat_parsing.response_parser import parse_response

    anchor = spec.get("start_anchor", "") if isinstance(spec, dict) else ""
    prefix = anchor[0] if isinstance(anchor, list) else anchor

    def parse(action: str) -> list[NativeCall]:
        span = (0, len(action))
        try:
            message = parse_response(action, spec, prefix=prefix)
            functions = [raw.get("function", raw) if isinstance(raw, dict) else {} for raw in message.get("tool_calls") or []]
            texts = [json.dumps(function) for function in functions]
        except ValueError as exc:  # a malformed region (e.g. invalid JSON in a tool call)
            return [NativeCall("", {}, span, f"tool call could not be parsed: {(str(exc).splitlines() or [''])[0]}")]
        except RecursionError:  # transformers' parser and json recurse once per level of nesting
            return [NativeCall("", {}, span, _depth_error())]
        return [_load_call(text, span) for text in texts]

    return parse


def call_format_for(tokenizer: Tokenizer) -> str | CallParser | None:
    """The tool-call parser for ``tokenizer``: transformers' response parsing when it ships a
    ``response_template``, else its family's format read from the chat template (None: GEM tags)."""
    parser = response_template_parser(tokenizer)
    if parser is not None:
        return parser
    template = str(getattr(tokenizer, "chat_template", "") or "")
    if "<tool_call>" in template or "<tool_response>" in template:
        return "hermes"
    if "tool▁call▁begin" in template or "tool▁outputs▁begin" in template:
        return "deepseek_v3"
    if "[TOOL_CALLS]" in template or "[TOOL_RESULTS]" in template:
        return "mistral"
    if "ipython" in template or "<|python_tag|>" in template:
        return "llama3_json"
    return None
