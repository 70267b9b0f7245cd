"""GEM's two RL2 env files on ``swe:Sample-v0``, a scripted policy behind the fake SGLang router: rl-square
0.0.2's own rollout loop (``Rollout.rollout``, from ``conftest.py``) with :class:`ResetStepEnv`, and RL2 main's
``generate`` contract (the ``Sample`` stand-in of ``test_generate.py``) with :class:`GenerateEnv`. The tool
calls reach the SWE env and the grader's reward (the repository's tests in the sandbox) lands on the last
action token."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("RL2.datasets", reason="needs rl-square==0.0.2 (nox -s rl2)")

from gem_adapters.rl2 import GenerateEnv, ResetStepEnv  # noqa: E402
from gem_adapters.rl2.api import dataset_row  # noqa: E402
from gem_core.rows.label import EpisodeLabel  # noqa: E402
from gem_adapters.rl2.make_dataset import make_dataset  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402
from gem_core.tools.sandbox import available_modes  # noqa: E402
from test_generate import Sample, _config  # noqa: E402  (RL2 main's Sample dataclass, and its config)
from ci_guard import module_needs

_bubblewrap = module_needs("bwrap" in available_modes(), "the SWE grader runs in the bubblewrap sandbox")

FIX = {"path": "gemstats/__init__.py", "old": "    return (ordered[middle] + ordered[middle + 1]) / 2",
       "new": "    return (ordered[middle - 1] + ordered[middle]) / 2"}


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


EPISODES = pytest.mark.parametrize(("actions", "expected"), [
    ([tool_call("view", path=FIX["path"]), tool_call("replace", **FIX), tool_call("submit")], 1.0),
    ([tool_call("submit")], 0.0),
])


@EPISODES
async def test_rl_square_rollout_plays_a_scripted_swe_episode_rewarded_by_the_grader(
    tokenizer, fake_router, rl_square, open_envs, actions, expected
):
    (row,) = make_dataset("swe:Sample-v0", 1)
    env = ResetStepEnv(tokenizer)
    async with fake_router(ScriptedPolicy(tokenizer, actions)) as (url, requests):
        tensor_dicts, metric = await rl_square(url, env, max_new_tokens=512).rollout(row, train=True)

    assert metric["n_turns"] == [len(actions)], "the episode ended on submit, not at rl-square's max_turns"
    assert metric["scores"] == pytest.approx([expected])
    assert len(tensor_dicts) == 1, "GEM's next_state extends the previous state: one sequence per episode"
    td = tensor_dicts[0]
    rewards = td["rewards"].tolist()
    last_action = max(i for i, m in enumerate(td["action_mask"].tolist()) if m)
    assert rewards[last_action] == pytest.approx(expected) and sum(rewards) == pytest.approx(expected)
    sampled = [tokenizer.decode(request["input_ids"]) for request in requests[1:]]
    assert all(action in text for action, text in zip(actions, sampled)), "each tool call is in the next turn's state"
    assert len(env.episodes) == 0 and open_envs.open == 0, "the finished episode closed its env (and its sandbox)"


@EPISODES
async def test_rl2_main_generate_plays_a_scripted_swe_episode_rewarded_by_the_grader(tokenizer, fake_router, open_envs, actions, expected):
    sample = Sample(sample=dataset_row(EpisodeLabel("swe:Sample-v0", 0)))
    async with fake_router(ScriptedPolicy(tokenizer, actions)) as (url, _):
        await GenerateEnv().generate(_config(max_new_tokens=512), tokenizer, url, sample)

    assert sample.status == Sample.Status.DONE
    assert sample.metrics["turns"] == [len(actions)]
    (seq,) = sample.state_dicts
    last_action = max(i for i, m in enumerate(seq["action_mask"]) if m)
    assert seq["rewards"][last_action] == pytest.approx(expected) and sum(seq["rewards"]) == pytest.approx(expected)
    sampled = tokenizer.decode([t for t, m in zip(seq["states"], seq["action_mask"]) if m])
    assert all(action in sampled for action in actions), "each tool call is a sampled turn"
    assert open_envs.open == 0, "the finished episode closed its env (and its sandbox)"
