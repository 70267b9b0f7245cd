"""Fixtures shared by the whole suite: the tiny in-process tokenizer and model from gem_core.testing."""

from __future__ import annotations

import pytest

from gem_core.testing import make_model, make_tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A ChatML (Qwen-style) byte-level BPE tokenizer trained in-process (read-only, shared)."""
    return make_tokenizer("chatml")


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer):
    """A random-weight 2-layer Qwen2ForCausalLM for ``tiny_tokenizer`` (read-only, shared)."""
    return make_model(tiny_tokenizer, seed=0)


@pytest.fixture(scope="module")
def retrieval_server():
    """The retrieval server over the shipped corpus, for one test module (tools and QA tests)."""
    pytest.importorskip("bm25s")
    pytest.importorskip("httpx")
    from server_process import RetrievalServerProcess

    server = RetrievalServerProcess()
    yield server
    server.stop()
