"""Lifecycles and error reporting (issue 13 items 3-4): sessions close their envs, ToolUse closes its
tools, nothing is left running after 100 episodes, errors are counted and logged once per env id."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import uuid

import pytest

from gem_core.rollout import ChatTemplate, EpisodeSession, run_episodes, trajectory_metrics
from gem_core.testing import ScriptedPolicy, make_tokenizer
from gem_core.tools.tool import SyncTool, Tool, ToolCall, ToolResult
from gem_core.wrappers.tools import ToolUse


class ServerTool(SyncTool):
    """Starts a helper process and a watcher thread on first use, like an MCP server and its loop thread."""

    name = "server"
    live: set[ServerTool] = set()

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.thread: threading.Thread | None = None
        self._stop = threading.Event()

    def parse(self, action: str) -> list[ToolCall]:
        at = action.find("<server/>")
        return [] if at < 0 else [ToolCall(self.name, "ping", (at, at + 9))]

    def execute(self, call: ToolCall) -> ToolResult:
        if self.process is None:
            self.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            self.thread = threading.Thread(target=self._stop.wait, daemon=True)
            self.thread.start()
            ServerTool.live.add(self)
        return ToolResult("pong", True)

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self._stop.set()
            self.thread.join()
            self.process = None
            ServerTool.live.discard(self)


def _live_children() -> int:
    """Running (not zombie) child processes of this process, read from /proc."""
    import os
    from pathlib import Path

    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            count += 1
    return count


def test_tools_follow_the_protocol_with_close():
    assert isinstance(ServerTool(), Tool)
    assert callable(Tool.close)


async def test_aclose_and_async_with_close_the_env(scripted_env):
    tokenizer = make_tokenizer("chatml")
    env = scripted_env(rewards=[1.0])
    closed = []
    env.close = lambda: closed.append(True)
    async with EpisodeSession(env, tokenizer) as session:
        await session.start(seed=0)
        await session.step(action_text="x")
    assert closed == [True]
    await session.aclose()  # twice is fine
    assert closed == [True]


async def test_hundred_episodes_leave_no_process_or_thread_behind(scripted_env):
    tokenizer = make_tokenizer("chatml")
    policy = ScriptedPolicy(tokenizer, ["<server/>", "done"])
    names_before = {t.name for t in threading.enumerate()}
    children_before = _live_children()
    trajectories = await run_episodes(
        lambda: ToolUse(scripted_env(rewards=[1.0]), [ServerTool()], add_instructions=False),
        policy,
        tokenizer,
        seeds=range(100),
        concurrency=8,
    )
    assert len(trajectories) == 100 and all(t.episode_return == 1.0 and t.num_turns == 2 for t in trajectories)
    assert ServerTool.live == set()  # every tool's process was killed and its thread joined
    assert _live_children() <= children_before
    # Pool workers (the env pool, the loop's default executor) are reused, bounded and shut down with
    # their owners; anything else still alive after the run is a leak.
    pools = ("gem-env_", "asyncio_", "ThreadPoolExecutor")
    leftover = [t.name for t in threading.enumerate() if t.name not in names_before and not t.name.startswith(pools)]
    assert leftover == []
    assert threading.active_count() - len(names_before) <= 256 + 64


async def test_errors_are_counted_and_logged_once_per_env_id(scripted_env, caplog):
    tokenizer = make_tokenizer("chatml")
    env_id = f"broken-env-{uuid.uuid4().hex}"  # an id no earlier test has warned about
    trajectories = []
    with caplog.at_level(logging.WARNING, logger="gem"):
        for seed in range(3):
            session = EpisodeSession(scripted_env(rewards=[0.0, 1.0], fail_on_turn=1), tokenizer, env_id=env_id)
            await session.start(seed=seed)
            await session.step(action_text="x")
            trajectories.append(session.trajectory())
    ok = EpisodeSession(scripted_env(rewards=[1.0]), tokenizer, env_id="fine-env")
    await ok.start(seed=0)
    await ok.step(action_text="x")
    trajectories.append(ok.trajectory())
    records = [r for r in caplog.records if r.name.startswith("gem") and env_id in r.getMessage()]
    assert len(records) == 1 and "tool crashed" in records[0].getMessage()
    metrics = trajectory_metrics(trajectories)
    assert metrics["gem/env_error_rate"] == 0.75 and metrics["gem/env_error_turns"] == 3.0
    assert metrics["gem/truncated"] == 0.75 and metrics["gem/terminated"] == 0.25
    assert metrics["gem/turns"] == 1.0 and metrics["gem/return"] == 0.25
    assert trajectory_metrics([]) == {}


def _tokenizer_with(template):
    from transformers import PreTrainedTokenizerFast

    base = make_tokenizer("chatml")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=base.backend_tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = template
    return tokenizer


async def test_template_error_mid_episode_is_a_truncation_and_does_not_poison_the_cache(monkeypatch, scripted_env):
    """A template that stamps the time itself (no date_string to freeze) changes under the episode."""
    import datetime as dt

    import transformers.utils.chat_template_utils as ctu

    class _Clock:
        current = dt.datetime(2026, 3, 14, 23, 59)

        @classmethod
        def now(cls, tz=None):
            return cls.current

    monkeypatch.setattr(ctu, "datetime", _Clock)
    template = "{{ strftime_now('%H:%M') }}" + make_tokenizer("chatml").chat_template
    tokenizer = _tokenizer_with(template)
    session = EpisodeSession(scripted_env(rewards=[0.0, 0.0, 1.0]), tokenizer, env_id="clocked")
    probed = session.chat_template
    await session.start(seed=0)
    _Clock.current = _Clock.current.replace(minute=58)
    step = await session.step(action_text="a")  # must not raise
    assert step.done and step.truncated and "ChatTemplateError" in step.info["error"]
    assert session.trajectory().metrics["truncated_by"] == "error"
    fresh = ChatTemplate.for_tokenizer(tokenizer)
    assert fresh is not probed  # evicted: the next episode probes again and runs
    session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tokenizer)
    await session.start(seed=1)
    assert not (await session.step(action_text="a")).done
