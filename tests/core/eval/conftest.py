"""Fixtures of the eval tests: the tiny model saved to disk (``tiny_model``/``tiny_tokenizer`` come from
tests/conftest.py) and a scripted binary-search player for GuessTheNumber."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers")
pytest.importorskip("httpx")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer, tiny_model):
    """The tiny model and tokenizer saved with ``save_pretrained``: what ``--model PATH`` loads."""
    path = tmp_path_factory.mktemp("tiny-model")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


_HINT = re.compile(r"(higher|lower) than (-?\d+)")
_RANGE = re.compile(r"between (-?\d+) and (-?\d+)")


def binary_search_move(conversation: str) -> str:
    """The next GuessTheNumber move of a binary search, from the game's text so far."""
    low, high = (int(x) for x in _RANGE.search(conversation).groups())
    for direction, number in _HINT.findall(conversation):
        if direction == "higher":
            low = max(low, int(number) + 1)
        else:
            high = min(high, int(number) - 1)
    return f"I guess \\boxed{{{(low + high) // 2}}}"


@pytest.fixture(scope="session")
def binary_search():
    return binary_search_move
