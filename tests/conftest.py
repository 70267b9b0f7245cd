"""Fixtures shared by the whole suite: the tiny in-process tokenizer and model from gem_core.testing."""

from __future__ import annotations

import dataclasses

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


@pytest.fixture
def no_home(monkeypatch):
    """A user with no ``$HOME`` and no passwd entry (a container's random uid, as Kubernetes runs them): ``~``
    cannot be determined, and ``Path.home()`` raises."""
    import pwd

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)


@pytest.fixture(autouse=True)
def _session_trajectories_are_checked(monkeypatch):
    """EpisodeSession builds each trajectory without TokenTrajectory's construction checks (a per-episode cost on
    every rollout, issue 46), because its books keep the invariants turn by turn; every trajectory built that way in
    a test is checked here instead, with every field given."""
    from gem_core.rollout.trajectory import TokenTrajectory

    unchecked = TokenTrajectory._from_checked_parts.__func__

    def checked(cls, fields):
        assert list(fields) == [f.name for f in dataclasses.fields(cls)], "every field must be given, in the dataclass's order"
        trajectory = unchecked(cls, fields)
        trajectory.__post_init__()
        return trajectory

    monkeypatch.setattr(TokenTrajectory, "_from_checked_parts", classmethod(checked))
