"""The gem_rebn estimator through verl's own lookup, on a DataProto built from real GemAgentLoop outputs."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.protocol import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos

import gem_core
from gem_adapters.verl.advantage import ESTIMATOR_NAME, compute_rebn_advantage, turns_from_mask
from gem_core.rollout.advantages import discounted_returns, return_batch_normalize, turn_to_token_advantages
from gem_core.testing import ScriptedPolicy


def _wordle_actions(seed: int, script: str) -> list[str]:
    env = gem_core.make("game:Wordle-v0")
    env.reset(seed=seed)
    target = env.target
    partial = target[:2] + "".join("z" if c == "q" else "q" for c in target[2:])
    return {
        "solve_late": [f"\\boxed{{{partial}}}", "no box", f"\\boxed{{{target}}}"],
        "solve_now": [f"\\boxed{{{target}}}"],
        "fumble": ["no box", f"\\boxed{{{partial}}}"],
    }[script]


def batch_from_outputs(outputs, response_length: int) -> DataProto:
    """Pad AgentLoopOutput.as_dict() rows the way verl's trainer pads them before computing advantages."""
    rows = [o.as_dict() for o in outputs]

    def pad(key: str, dtype: torch.dtype) -> torch.Tensor:
        out = torch.zeros(len(rows), response_length, dtype=dtype)
        for i, row in enumerate(rows):
            out[i, : len(row[key])] = row[key]
        return out

    rm_scores = pad("rm_scores", torch.float32)
    return DataProto.from_dict(
        tensors={
            "responses": pad("responses", torch.int64),
            "response_mask": pad("response_mask", torch.int64),
            "token_level_scores": rm_scores,
            "token_level_rewards": rm_scores,
        },
        non_tensors={"uid": np.array([f"uid-{i // 2}" for i in range(len(rows))], dtype=object)},
    )


def core_rebn(outputs, gamma: float, response_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The same numbers from gem_core alone, using the per-turn rewards and spans the loop reported."""
    returns = [discounted_returns(o.extra_fields["turn_scores"], gamma) for o in outputs]
    normalized = return_batch_normalize(np.concatenate(returns))
    advantages, token_returns, offset = [], [], 0
    for o, g in zip(outputs, returns):
        spans = [tuple(s) for s in o.extra_fields["extras"]["turn_spans"]]
        advantages.append(turn_to_token_advantages(normalized[offset : offset + len(g)], spans, response_length))
        token_returns.append(turn_to_token_advantages(g, spans, response_length))
        offset += len(g)
    return np.stack(advantages), np.stack(token_returns)


@pytest.fixture()
async def loop_outputs(make_agent_loop, server_for, model_server, tiny_tokenizer, make_row, sampling_params):
    """Real GemAgentLoop outputs: scripted Wordle games (varied per-turn rewards) and tiny-model games."""
    outputs = []
    for seed, script in [(3, "solve_late"), (4, "solve_now"), (5, "fumble")]:
        server = server_for(ScriptedPolicy(tiny_tokenizer, _wordle_actions(seed, script)))
        outputs.append(await make_agent_loop(server, max_turns=3).run(sampling_params, **make_row("game:Wordle-v0", seed)))
    for seed in (6, 7):
        loop = make_agent_loop(model_server, max_turns=3, max_new_tokens=10)
        outputs.append(await loop.run(sampling_params, **make_row("game:Wordle-v0", seed)))
    return outputs


def test_estimator_is_in_verls_registry():
    assert core_algos.get_adv_estimator_fn(ESTIMATOR_NAME) is compute_rebn_advantage


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_verls_compute_advantage_with_gem_rebn_matches_core_rebn(loop_outputs, response_length, gamma):
    from verl.trainer.ppo.ray_trainer import compute_advantage  # what verl's v1 trainer calls for non-GRPO estimators

    data = batch_from_outputs(loop_outputs, response_length)
    result = compute_advantage(
        data, adv_estimator=ESTIMATOR_NAME, gamma=gamma, config=AlgoConfig(adv_estimator=ESTIMATOR_NAME, gamma=gamma)
    )
    expected_adv, expected_returns = core_rebn(loop_outputs, gamma, response_length)
    np.testing.assert_allclose(result.batch["advantages"].numpy(), expected_adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.batch["returns"].numpy(), expected_returns, rtol=1e-5, atol=1e-6)
    # Advantages live only on sampled tokens, and differ between turns of one episode.
    assert torch.all(result.batch["advantages"][data.batch["response_mask"] == 0] == 0)
    first = result.batch["advantages"][0]
    spans = loop_outputs[0].extra_fields["extras"]["turn_spans"]
    assert len({round(float(first[s]), 6) for s, _ in spans}) == len(spans) == 3


def test_gamma_comes_from_the_algorithm_config(loop_outputs, response_length):
    data = batch_from_outputs(loop_outputs, response_length)
    fn = core_algos.get_adv_estimator_fn(ESTIMATOR_NAME)
    rewards, mask = data.batch["token_level_rewards"], data.batch["response_mask"]
    _, returns_1 = fn(token_level_rewards=rewards, response_mask=mask, config=AlgoConfig(gamma=1.0))
    _, returns_05 = fn(token_level_rewards=rewards, response_mask=mask, config=AlgoConfig(gamma=0.5))
    first_turn = loop_outputs[0].extra_fields["extras"]["turn_spans"][0][0]
    scores = loop_outputs[0].extra_fields["turn_scores"]
    assert float(returns_1[0, first_turn]) == pytest.approx(sum(scores), abs=1e-6)
    assert float(returns_05[0, first_turn]) == pytest.approx(scores[0] + 0.5 * scores[1] + 0.25 * scores[2], abs=1e-6)


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 6)), min_size=0, max_size=6), st.integers(0, 5))
def test_turns_from_mask_recovers_turn_spans(layout, tail):
    mask, spans = [], []
    for gap, width in layout:
        mask += [0] * (max(gap, 1) if spans else gap)  # env tokens always separate two turns
        spans.append((len(mask), len(mask) + width))
        mask += [1] * width
    mask += [0] * tail
    assert turns_from_mask(np.array(mask)) == spans


def test_gem_declares_the_verl_plugin_entry_point():
    from importlib.metadata import entry_points

    values = {ep.value for ep in entry_points(group="verl.plugins")}
    # A missing entry point is the regression this test exists for: it fails, never skips.
    assert values & {"gem_adapters.verl.advantage", "gem_adapters.verl.advantage:compute_rebn_advantage"}, (
        "the installed gem has no `verl.plugins` entry point, so verl's Ray workers never register gem_rebn; "
        'pyproject.toml needs [project.entry-points."verl.plugins"] gem_rebn = "gem_adapters.verl.advantage" (then reinstall)'
    )
    code = "import verl\nfrom verl.trainer.ppo.core_algos import get_adv_estimator_fn\nprint(get_adv_estimator_fn('gem_rebn').__module__)"
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_USE_EXTERNAL_MODULES", "VERL_USE_EXTERNAL_PLUGINS")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "gem_adapters.verl.advantage"


def test_plugin_module_registers_the_estimator_in_a_fresh_verl_process():
    """verl computes advantages in its own (Ray actor) process; VERL_USE_EXTERNAL_MODULES makes `import verl`
    register gem_rebn there (the `verl.plugins` entry point does the same without the variable)."""
    code = "import verl\nfrom verl.trainer.ppo.core_algos import get_adv_estimator_fn\nprint(get_adv_estimator_fn('gem_rebn').__module__)"
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "gem_adapters.verl.advantage"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "gem_adapters.verl.advantage"


from conftest import EMPTY_ACTION_PAYS_ENV_ID as _EMPTY_PAYS_ENV_ID  # noqa: E402 - this folder is on sys.path


async def test_an_empty_turns_reward_reaches_the_same_tokens_in_gae_reinforce_pp_and_gem_rebn(
    make_agent_loop, tiny_tokenizer, make_row, sampling_params
):
    """A turn that sampled nothing (the engine returned no token) has no token to train; its reward goes with the last
    sampled token before it, so verl's token-level estimators and gem_rebn all add it to that turn, undiscounted."""
    from verl.workers.rollout.replica import TokenOutput

    from gem_core.rollout.chat_template import ChatTemplate

    hello = tiny_tokenizer.encode("hello", add_special_tokens=False) + list(ChatTemplate.for_tokenizer(tiny_tokenizer).end_of_turn_ids)

    class Server:
        turn = 0

        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            ids = [] if self.turn == 1 else hello  # turn 2: an empty completion
            self.turn += 1
            return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")

    row = make_row("game:Wordle-v0", 1)
    row["extra_info"] = {**row["extra_info"], "env_id": _EMPTY_PAYS_ENV_ID}
    out = await make_agent_loop(Server(), max_turns=3).run(sampling_params, **row)
    scores = out.extra_fields["turn_scores"]
    assert scores == pytest.approx([0.1, 1.0, 0.1])
    spans = out.extra_fields["extras"]["turn_spans"]
    assert spans[1][0] == spans[1][1]  # the empty turn

    d = out.as_dict()
    rewards, mask = d["rm_scores"][None].float(), d["response_mask"][None].float()
    assert torch.all(mask[rewards != 0] == 1)  # every reward sits on a sampled token
    first, last = spans[0][0], spans[2][0]
    _, gae = core_algos.compute_gae_advantage_return(rewards, torch.zeros_like(rewards), mask, gamma=torch.tensor(1.0), lam=torch.tensor(1.0))
    _, rpp = core_algos.compute_reinforce_plus_plus_outcome_advantage(rewards, mask, config=AlgoConfig(gamma=1.0))
    _, rebn = compute_rebn_advantage(rewards, mask, AlgoConfig(gamma=1.0))
    for returns in (gae, rpp, rebn):
        assert float(returns[0, first]) == pytest.approx(sum(scores))
        assert float(returns[0, last]) == pytest.approx(scores[2])
    _, rebn_half = compute_rebn_advantage(rewards, mask, AlgoConfig(gamma=0.5))
    assert float(rebn_half[0, first]) == pytest.approx(scores[0] + scores[1] + 0.5 * scores[2])
