"""``gem.utils.parsing``: GEM's answer extractors, with gem-llm 0.1.0's exact results.

Code written for GEM grades with these (custom envs, GEM's training examples), so they answer as GEM's do,
not as the core's more forgiving :func:`gem_core.envs.math.answer.extract_boxed`: the last ``\\boxed``
(or, only without one, ``\\fbox``) must close, ``\\boxed{`` must be written with no space, and the answer is
returned unstripped.
"""

from __future__ import annotations

import re

from gem_core.tools.tags import tag_spans

__all__ = [
    "extract_code_from_model",
    "extract_last_boxed_answer",
    "extract_last_tagged_answer",
    "last_boxed_only_string",
    "remove_boxed",
]

_BOXED_OPEN = "\\boxed{"
_FENCED_CODE = re.compile(r"```(?:\w+)?\n(.*?)```", re.DOTALL)


def last_boxed_only_string(string: str) -> str | None:
    """The last ``\\boxed...{...}`` of ``string`` (the last ``\\fbox`` if it has no ``\\boxed``), up to the
    brace that closes it; None if there is none or it never closes."""
    start = string.rfind("\\boxed")
    if start < 0:
        start = string.rfind("\\fbox")
        if start < 0:
            return None
    depth = 0
    for index in range(start, len(string)):
        if string[index] == "{":
            depth += 1
        elif string[index] == "}":
            depth -= 1
            if depth == 0:
                return string[start : index + 1]
    return None


def remove_boxed(s: str | None) -> str | None:
    """What lies inside ``\\boxed{...}``; None unless ``s`` is a str that starts with ``\\boxed{`` and ends with ``}``."""
    if not isinstance(s, str) or not s.startswith(_BOXED_OPEN) or not s.endswith("}"):
        return None
    return s[len(_BOXED_OPEN) : -1]


def extract_last_boxed_answer(solution: str) -> str | None:
    """The answer inside the last ``\\boxed{}`` of ``solution``, as written (not stripped); None if there is none."""
    return remove_boxed(last_boxed_only_string(solution))


def extract_code_from_model(model_response: str) -> str | None:
    """The last fenced code block (```` ```lang ```` then a newline) of ``model_response``, stripped; None if none."""
    blocks = _FENCED_CODE.findall(model_response)
    return blocks[-1].strip() if blocks else None


def extract_last_tagged_answer(model_response: str) -> str | None:
    """The last ``<answer>...</answer>`` of ``model_response``, stripped; None if none."""
    # GEM's re.finditer(r"<answer>(.*?)</answer>", re.DOTALL), in one pass (no rescan from unclosed openers)
    answers = list(tag_spans(model_response, "<answer>", "</answer>"))
    return answers[-1].body(model_response).strip() if answers else None
