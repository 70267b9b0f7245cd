"""``gem serve swe:Sample-v0``: a remote SWE episode (tool calls, the grader in the server's sandbox)
scores as a local one: the gold patch 1.0, the untouched tree 0.0."""

from __future__ import annotations

import json

import pytest

from gem_core.serve.remote import RemoteEnv
from gem_core.tools.sandbox import available_modes
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

GOLD = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
        "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_a_served_swe_episode_is_graded_like_a_local_one(start_server):
    server = start_server("swe:Sample-v0")
    remote = RemoteEnv(server.url, "swe:Sample-v0", timeout=60)
    try:
        observation, info = remote.reset(seed=0)
        assert "median()" in observation and info["task"] == "gemstats-median-even"
        assert remote.step(call("replace", **GOLD))[0].startswith("Replaced 1 occurrence")
        _, reward, terminated, _, info = remote.step(call("submit"))
        assert (reward, terminated, info["success"]) == (1.0, True, True)
        remote.reset(seed=0)
        assert remote.step(call("submit"))[1] == 0.0
    finally:
        remote.close()
