"""gem_adapters.rl2.generate against RL2 main's documented ``generate(config, tokenizer, router_url, sample)`` contract.

RL2 main is not on the package registry (the ``RL2``/``rl-square`` 0.0.2 there has the older
reset/step hook), so its ``RL2.datasets.rl.Sample`` cannot be imported: ``Sample`` below is a
stand-in with the fields and ``Status`` values of RL2 main's dataclass (checked by hand against a
source snapshot, not in CI), and the router is the fake SGLang router from ``conftest.py``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pytest

from gem_core.rows.label import EpisodeLabel, LabelError
from gem_adapters.rl2 import GenerateEnv
from gem_adapters.rl2.api import dataset_row
from gem_core.registry import make
from gem_core.rollout import run_episode
from gem_core.rollout.policy import TransformersPolicy, default_stop_token_ids
from gem_core.testing import ScriptedPolicy, make_model

ENV_ID = "game:GuessTheNumber-v0"
ACTIONS = ["no idea", "\\boxed{10}", "\\boxed{5}", "\\boxed{15}", "\\boxed{3}", "\\boxed{17}"]
MAX_NEW_TOKENS = 64


@dataclass
class Sample:
    """Minimal stand-in for RL2 main's ``RL2.datasets.Sample``."""

    class Status(Enum):
        RUNNING = "running"
        ABORTED = "aborted"
        DONE = "done"

    sample: dict[str, Any] = field(default_factory=dict)
    state_text: str = ""
    action_text: str = ""
    state_dict: dict[str, list] = field(default_factory=dict)
    state_dicts: list[dict[str, list]] = field(default_factory=list)
    turn: int = 0
    metrics: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    status: Status = Status.RUNNING


def _config(max_new_tokens: int | None = MAX_NEW_TOKENS) -> Any:
    OmegaConf = pytest.importorskip("omegaconf", reason="RL2 passes an OmegaConf config (nox -s rl2)").OmegaConf
    return OmegaConf.create({"sampling_params": {"temperature": 1.0, "max_new_tokens": max_new_tokens, "stop": None}})


async def _run(env: GenerateEnv, tokenizer, url: str, sample: Sample) -> None:
    # RL2's rollout calls generate again for an ABORTED sample (partial rollout), until DONE.
    for _ in range(100):
        await env.generate(_config(), tokenizer, url, sample)
        if sample.status == Sample.Status.DONE:
            return
    raise AssertionError("episode did not finish")


@pytest.mark.parametrize("abort_first", [False, True])
async def test_generate_writes_the_core_episode_into_the_sample(tokenizer, fake_router, abort_first, open_envs):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    core = await run_episode(make(ENV_ID), policy, tokenizer, seed=2, sampling=None)
    sample = Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 2)))
    async with fake_router(policy, abort_first=abort_first) as (url, requests):
        await _run(GenerateEnv(), tokenizer, url, sample)

    assert len(sample.state_dicts) == 1, "GEM episodes extend one sequence"
    seq = sample.state_dicts[0]
    n_prompt = len(core.prompt_ids)
    assert seq["states"] == core.prompt_ids + core.response_ids
    assert seq["action_mask"] == [0] * n_prompt + core.loss_mask
    assert seq["actions"] == [t if m else 0 for t, m in zip(seq["states"], seq["action_mask"])]
    assert seq["logps"] == pytest.approx([0.0] * n_prompt + core.logprobs)
    assert seq["rewards"] == pytest.approx([0.0] * n_prompt + core.token_rewards)
    assert sample.metrics["turns"] == [core.num_turns]
    assert sample.metrics["rewards"] == pytest.approx([core.episode_return])
    assert sample.metrics["env_error_turns"] == [0] and sample.metrics["truncated"] == [core.truncated]
    assert open_envs.made == 1 and open_envs.open == 0, "the finished episode's env is closed"
    assert len(requests) == core.num_turns + int(abort_first)
    assert all(r["return_logprob"] and r["sampling_params"]["no_stop_trim"] for r in requests)


async def test_a_turn_stops_at_the_end_of_turn_and_at_eos_like_every_other_adapter(tokenizer, fake_router):
    """A base model's eos is not its template's end of turn (``<|endoftext|>`` vs ``<|im_end|>``): a turn
    stops at either, the core's stop ids, as it does in the runner and the other adapters."""
    import copy

    base_tokenizer = copy.deepcopy(tokenizer)
    base_tokenizer.eos_token = "<|endoftext|>"
    stop_ids = default_stop_token_ids(base_tokenizer)
    assert len(stop_ids) == 2 and base_tokenizer.eos_token_id in stop_ids
    sample = Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 2)))
    async with fake_router(ScriptedPolicy(base_tokenizer, ACTIONS)) as (url, requests):
        await _run(GenerateEnv(), base_tokenizer, url, sample)
    assert requests and all(r["sampling_params"]["stop_token_ids"] == stop_ids for r in requests)


async def test_tiny_model_episode_respects_the_token_budget(tokenizer, fake_router):
    policy = TransformersPolicy(make_model(tokenizer), tokenizer)
    sample = Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 0)))
    async with fake_router(policy) as (url, requests):
        await _run(GenerateEnv(max_turns=3, max_total_tokens=400), tokenizer, url, sample)
    seq = sample.state_dicts[0]
    assert len(seq["states"]) <= 400
    assert len({len(v) for v in seq.values()}) == 1
    assert sum(seq["action_mask"]) == sum(sample.metrics["response_length"])
    assert all(lp < 0 for lp, m in zip(seq["logps"], seq["action_mask"]) if m)
    assert sum(1 for r in seq["rewards"] if r != 0) <= sample.turn <= 3


@pytest.mark.parametrize("max_new_tokens", [None, 0, -5, 2.5, "abc", True])
async def test_unset_or_bad_max_new_tokens_names_the_config_key(tokenizer, max_new_tokens):
    """-5 ran every turn with one token, 2.5 was sent to the engine, "abc" raised TypeError: refused, naming the key."""
    sample = Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 0)))
    with pytest.raises(ValueError, match="rollout.train.sampling_params.max_new_tokens"):
        await GenerateEnv().generate(_config(max_new_tokens), tokenizer, "http://127.0.0.1:9", sample)


@pytest.mark.parametrize(
    "row, message",
    [({"extra_info": {"label": '{"env_id": "game:GuessTheNumber-v0"}'}}, "'seed'"),
     ({"extra_info": {"label": '{"env_id": "game:Nope-v0", "seed": 1}'}}, "No env registered"),
     ({"prompt": "hi"}, "python -m gem_adapters.rl2 --env")],
)
async def test_bad_rows_fail_before_any_request(tokenizer, row, message):
    with pytest.raises(LabelError, match=message):
        await GenerateEnv().generate(_config(), tokenizer, "http://127.0.0.1:9", Sample(sample=row))


@pytest.mark.parametrize(
    "kwargs, message",
    [({"max_turns": 0}, "GenerateEnv: max_turns=0 must be a positive whole number of turns, or None."),
     ({"max_total_tokens": 0}, "GenerateEnv: max_total_tokens=0 must be a positive whole number, or None."),
     ({"system_prompt": 5}, "GenerateEnv: system_prompt=5 must be a str, or None.")],
)
def test_bad_options_are_refused_when_the_env_is_built_naming_the_key(kwargs, message):
    with pytest.raises(ValueError) as error:  # before: built, then failed at the first episode (or never, for a prompt)
        GenerateEnv(**kwargs)
    assert str(error.value) == message


@pytest.mark.parametrize("train", [True, False])
async def test_responses_per_prompt_below_one_is_refused_naming_the_key(tokenizer, train):
    config = _config()
    config.responses_per_prompt = 0  # before: played as 1 copy per row
    if train:
        config.partial_rollout = False  # only rollout.train has it
    split = "train" if train else "test"
    with pytest.raises(ValueError) as error:
        await GenerateEnv().generate(config, tokenizer, "http://127.0.0.1:9", Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 0))))
    assert str(error.value) == f"GenerateEnv: rollout.{split}: responses_per_prompt=0 must be a positive whole number."


async def test_aborted_episodes_rl2_abandons_are_closed_past_the_bound(tokenizer, fake_router, open_envs):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    env = GenerateEnv(max_open_episodes=1)
    abandoned = Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 0)))
    async with fake_router(policy, abort_first=True) as (url, _):
        await env.generate(_config(), tokenizer, url, abandoned)
        assert abandoned.status == Sample.Status.ABORTED and open_envs.open == 1
        await _run(env, tokenizer, url, Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 1))))
    assert open_envs.made == 2 and open_envs.open == 0 and len(env.episodes) == 0


async def test_a_resumed_turn_asks_only_for_the_room_its_pending_ids_leave(tokenizer, fake_router):
    """After a partial-rollout abort, the resumed request asked for ``max_new_tokens - pending`` new tokens without
    counting the pending ids against ``max_total_tokens``: with a prompt of P ids and room for 39 more, the first
    request asked for 39, was aborted after 19, and the resume asked for 39 more (58 sampled, 19 thrown away)."""
    from gem_core.rollout import EpisodeSession
    from gem_core.rollout.policy import Generation

    filler = tokenizer.encode(" a", add_special_tokens=False)[0]

    class Filler:  # an engine that never stops early: every request is sampled to its budget
        async def generate(self, prompt_ids, sampling):
            n = sampling.max_new_tokens
            return Generation(token_ids=[filler] * n, logprobs=[-0.1] * n, finish_reason="length")

    probe = EpisodeSession.from_label(EpisodeLabel(ENV_ID, 0), tokenizer)
    total = len(await probe.start()) + 40
    await probe.aclose()
    sample = Sample(sample=dataset_row(EpisodeLabel(ENV_ID, 0)))
    async with fake_router(Filler(), abort_first=True) as (url, requests):
        await _run(GenerateEnv(max_total_tokens=total, max_turns=1), tokenizer, url, sample)
    assert len(requests) == 2
    assert all(len(r["input_ids"]) + r["sampling_params"]["max_new_tokens"] <= total - 1 for r in requests), [
        (len(r["input_ids"]), r["sampling_params"]["max_new_tokens"]) for r in requests]
    assert len(sample.state_dicts[0]["states"]) <= total
