"""Fixtures shared by the whole suite: the tiny in-process tokenizer and model from gem_core.testing."""

from __future__ import annotations

import dataclasses
import os

import pytest

from gem_core import registry
from gem_core.testing import make_model, make_tokenizer


@pytest.fixture(autouse=True)
def scratch_registry(monkeypatch):
    """Ids a test registers vanish after it. The registry is process-wide: an id one test registered (the GEM way,
    ``gem.register("rg:mine", "gem.envs.reasoning_gym:ReasoningGymEnv")``) stayed for every later test, and a test
    that lists every shipped id failed or passed by the suite's order."""
    registry.list_envs()  # the shipped ids first (loaded once), so the copy holds them
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))


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
def small_disk(tmp_path):
    """A folder on a 400 KiB file system, to fill: a tmpfs, which only root may mount (CI runs as root; elsewhere the
    test is skipped, and in CI failed)."""
    import subprocess

    from ci_guard import skip_unless_ci

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(disk)],
                                                   capture_output=True).returncode == 0
    if not mounted:
        skip_unless_ci("a disk to fill is a small tmpfs, and only root may mount one")
    yield disk
    subprocess.run(["umount", "--lazy", str(disk)], check=True)


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
