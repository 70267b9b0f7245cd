"""gem_adapters.oat run by oat's own classes: ``PPOMultiTurnActor.step``, the learner's
``process_feedback_data`` and ``prepare_data``, and ``MultiTurnTransitionDataset.collate_fn``.

The modules oat imports that cannot be installed here (vLLM, DeepSpeed, launchpad, pyarrow.plasma)
are stand-ins (``conftest.py``); oat's classes are the real ones. What ``ActorBase.init`` would set up
with a GPU is set by hand: ``self.llm`` is a stand-in for ``vllm.LLM`` (its ``generate`` samples from a
gem_core policy and returns vLLM-shaped outputs) and ``self.ipc_client`` for oat's plasma client (it
hands the episodes back instead of writing them to shared memory). The learner is built without its
``__init__`` (which starts DeepSpeed) but runs oat's own data code, with a one-process gloo group for
``DistributedSampler``.
"""

from __future__ import annotations

import asyncio
import copy
import tracemalloc
from collections import defaultdict, deque
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch.distributed as dist

from oat.algorithms.ppo import PPOArgs
from oat.algorithms.ppo_multiturn import MultiTurnTransitionDataset, PPOMultiTurnActor, PPOMultiTurnLearner
from oat.types import Transition
from oat.utils.deepspeed import DeepspeedStrategy

from gem_adapters import framework_version
from gem_adapters.oat import GemArgsMixin, actor_class, learner_class, oat_transitions
from gem_adapters.oat import actor as actor_module
from gem_adapters.oat.actor import BosTokenError, OatVersionError, tokenizer_writing_bos
from gem_core.registry import UnknownEnvError, make
from gem_core.rollout import SamplingParams, discounted_returns, run_episode
from gem_core.testing import ScriptedPolicy, make_tokenizer

from vllm import SamplingParams as VllmSamplingParams  # the stand-in from conftest.py where vLLM is missing

ENV_ID = "game:GuessTheNumber-v0"
ACTIONS = ["no idea", "\\boxed{10}", "\\boxed{5}", "\\boxed{15}", "\\boxed{3}", "\\boxed{17}"]


@dataclass
class Args(GemArgsMixin, PPOArgs):
    """What examples/train_oat.py builds: oat's PPO flags plus the env fields."""


@dataclass
class _Logprob:
    logprob: float


class StandInLLM:
    """``vllm.LLM.generate(prompt_token_ids=..., sampling_params=[...])`` backed by a gem_core policy."""

    def __init__(self, policy: Any):
        self.policy, self.batch_sizes, self.prompts = policy, [], []

    def generate(self, prompt_token_ids, sampling_params, lora_request=None, use_tqdm=False):
        self.batch_sizes.append(len(prompt_token_ids))
        self.prompts.extend(list(p) for p in prompt_token_ids)  # vLLM adds no bos to token-id prompts
        outputs = []
        for prompt, params in zip(prompt_token_ids, sampling_params, strict=True):
            assert params.logprobs == 1 and params.n == 1
            sampling = SamplingParams(max_new_tokens=params.max_tokens, stop_token_ids=params.stop_token_ids)
            gen = asyncio.run(self.policy.generate(prompt, sampling))
            completion = SimpleNamespace(token_ids=gen.token_ids, finish_reason=gen.finish_reason,
                                         logprobs=[{t: _Logprob(lp)} for t, lp in zip(gen.token_ids, gen.logprobs)])
            outputs.append(SimpleNamespace(prompt_token_ids=prompt, outputs=[completion]))
        return outputs


class _ReturnIPC:
    """oat's PlasmaShmClient stand-in: ``serialize_ipc`` hands the object back."""

    def serialize_ipc(self, data: Any) -> Any:
        return data


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer("chatml")


def make_args(**overrides: Any) -> Args:
    args = Args(env_id=ENV_ID, num_env=3, rollout_batch_size_per_device=8, rollout_batch_size=8, max_train=64, gamma=0.9)
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def make_actor(policy: Any, tokenizer: Any, **overrides: Any) -> Any:
    cls = actor_class()
    actor = cls(ipc_server=None, vllm_args={}, args=make_args(**overrides))  # oat's ActorBase.__init__
    # What ActorBase.init sets once vLLM has loaded the model:
    actor.actor_id, actor.tokenizer, actor.use_lora_req = 0, tokenizer, False
    actor.sampling_params = VllmSamplingParams(max_tokens=64)
    actor.llm, actor.ipc_client = StandInLLM(policy), _ReturnIPC()
    return actor


@pytest.fixture(scope="module")
def played(tokenizer):
    """The episodes oat's own ``PPOMultiTurnActor.step`` returns, and the policy that played them."""
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    actor = make_actor(policy, tokenizer)
    return actor, actor.step(), policy


@pytest.fixture(scope="module")
def gloo():
    """A one-process gloo group: oat's dataloaders use DistributedSampler."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def make_learner(args: Args) -> Any:
    cls = learner_class()
    learner = cls.__new__(cls)  # __init__ starts DeepSpeed; oat's data code below only needs these fields
    learner.args, learner.critic, learner.query_step = args, None, 0
    learner.pi_buffer, learner.all_buffer = deque(), deque()
    return learner


def test_gem_classes_are_oats_multi_turn_classes():
    assert issubclass(actor_class(), PPOMultiTurnActor)
    assert issubclass(learner_class(), PPOMultiTurnLearner)


def test_oats_step_returns_the_core_episodes_as_transitions(played, tokenizer):
    actor, episodes, policy = played
    assert sum(len(e) for e in episodes) >= actor.args.rollout_batch_size_per_device
    # Turns requested in the same event-loop pass go to vLLM together (how many depends on when envs answer).
    assert 1 < max(actor.llm.batch_sizes) <= actor.args.num_env
    returns, truncated = [], []
    for seed, episode in enumerate(episodes):  # actor 0 plays seeds 0, 1, 2, ...
        core = asyncio.run(run_episode(make(ENV_ID), policy, tokenizer, seed=seed, sampling=SamplingParams(max_new_tokens=64)))
        returns.append(core.episode_return)
        truncated.append(core.truncated)
        assert all(isinstance(t, Transition) for t in episode)
        assert [t.done for t in episode] == [False] * (len(episode) - 1) + [True]
        for t, expected in zip(episode, core.as_transitions(), strict=True):
            assert t.prompt_ids == expected.context_ids
            assert t.response_ids == expected.action_ids
            assert t.response_logprobs == pytest.approx(expected.action_logprobs)
            assert t.rewards == expected.reward
    # oat's step wrote its episode statistics (computed from the adapter's transitions) into every transition.
    info = episodes[0][0].info
    assert info["actor/mean_episode_return"] == pytest.approx(np.mean(returns))
    assert info["actor/num_episodes"] == len(episodes)
    assert info["actor/gem/truncated"] == pytest.approx(np.mean(truncated))
    assert info["actor/gem/return"] == pytest.approx(np.mean(returns))
    assert info["actor/gem/env_error_rate"] == 0.0


def test_history_as_rendered_gives_each_turn_the_history_the_template_renders():
    qwen3 = make_tokenizer("drop_thinking")  # drops earlier turns' <think> blocks, as Qwen3 does
    thinking = ["<think>hmm</think>\\boxed{10}", "<think>so</think>\\boxed{5}", "<think>ok</think>\\boxed{15}"] * 3
    policy = ScriptedPolicy(qwen3, thinking)
    actor = make_actor(policy, qwen3, num_env=1, rollout_batch_size_per_device=2, history="as_rendered")
    (episode, *_) = actor.step()
    core = asyncio.run(run_episode(make(ENV_ID), ScriptedPolicy(qwen3, thinking), qwen3, seed=0, history="as_rendered",
                                   sampling=SamplingParams(max_new_tokens=64)))
    expected = core.as_transitions()
    assert len(episode) == len(expected) > 1
    assert [t.prompt_ids for t in episode] == [e.context_ids for e in expected]
    assert [t.response_ids for t in episode] == [e.action_ids for e in expected]
    assert "hmm" not in qwen3.decode(episode[1].prompt_ids), "the earlier think block is gone, as at inference"


def chatml_with_unwritten_bos():
    """A DeepSeek-style tokenizer: a bos token, and a ChatML template that never writes it."""
    tokenizer = copy.deepcopy(make_tokenizer("chatml"))
    tokenizer.bos_token = "<|begin_of_text|>"
    assert tokenizer.bos_token_id is not None and "bos_token" not in tokenizer.chat_template
    return tokenizer


@pytest.mark.parametrize("history", ["as_sampled", "as_rendered"])
def test_a_bos_the_template_never_writes_is_part_of_every_prompt_oat_and_the_loss_see(history):
    tokenizer = chatml_with_unwritten_bos()
    actor = make_actor(ScriptedPolicy(tokenizer, ACTIONS), tokenizer, num_env=2, rollout_batch_size_per_device=4, history=history)
    episodes = actor.step()  # oat's ActorBase.generate asserts the bos id is in the prompt ids it sent
    transitions = [t for episode in episodes for t in episode]
    assert transitions and all(t.prompt_ids[0] == tokenizer.bos_token_id for t in transitions)
    assert all(tokenizer.bos_token_id not in t.prompt_ids[1:] for t in transitions)
    # Token-exact: each transition's prompt is exactly what vLLM was given for that turn.
    sent = {tuple(p) for p in actor.llm.prompts}
    assert all(tuple(t.prompt_ids) in sent for t in transitions)
    assert actor.tokenizer.chat_template == tokenizer.chat_template, "the actor's own tokenizer is left as it was"


def test_tokenizers_oat_accepts_as_they_are_are_used_unchanged():
    llama3 = make_tokenizer("llama3")  # its template writes the bos
    assert tokenizer_writing_bos(llama3) is llama3
    chatml = make_tokenizer("chatml")  # no bos token: oat checks nothing
    assert tokenizer_writing_bos(chatml) is chatml


def test_named_templates_all_get_the_bos():
    tokenizer = chatml_with_unwritten_bos()
    tokenizer.chat_template = {"default": tokenizer.chat_template, "tool_use": tokenizer.chat_template}
    patched = tokenizer_writing_bos(tokenizer)
    assert all(t.startswith("{{ bos_token }}") for t in patched.chat_template.values())
    assert not any(t.startswith("{{ bos_token }}") for t in tokenizer.chat_template.values())


def test_a_bos_that_cannot_be_written_fails_at_start_up_naming_the_tokenizer_and_fix(monkeypatch):
    tokenizer = chatml_with_unwritten_bos()
    tokenizer.name_or_path = "org/deepseek-style"
    monkeypatch.setattr(actor_module, "_prompt_ids", lambda tokenizer, system_prompt: [tokenizer.bos_token_id + 1])  # the bos never renders
    actor = make_actor(ScriptedPolicy(tokenizer, ACTIONS), tokenizer)
    with pytest.raises(BosTokenError, match=r"(?s)org/deepseek-style.*starts with '\{\{ bos_token \}\}'"):
        actor.step()
    assert actor.llm.batch_sizes == [], "nothing was sampled"


def test_learner_turns_the_episodes_into_oats_training_batch(played, tokenizer):
    actor, episodes, _ = played
    args = actor.args
    learner = make_learner(args)
    learner.process_feedback_data(copy.deepcopy(episodes))  # oat's: per-turn returns, flatten, subsample
    buffer = list(learner.pi_buffer)
    assert len(buffer) == min(args.rollout_batch_size_per_device, sum(len(e) for e in episodes))

    expected = defaultdict(list)  # (prompt ids, response ids) -> discounted returns of that turn (seeds can share a turn)
    for episode in episodes:
        for t, ret in zip(episode, discounted_returns([t.rewards for t in episode], args.gamma)):
            expected[(tuple(t.prompt_ids), tuple(t.response_ids))].append(ret)
    strategy = DeepspeedStrategy(args=SimpleNamespace(dry_run=False))
    strategy.is_rank_0 = lambda: True  # no process group needed to build the dataset
    dataset = MultiTurnTransitionDataset(buffer, tokenizer, strategy)
    batch = dataset.collate_fn([dataset[i] for i in range(len(dataset))])
    for row, t, lens, advantage in zip(batch["input_ids"], buffer, batch["prompt_ids_lens"], batch["advantages"]):
        ids = t.prompt_ids + t.response_ids
        assert row[: len(ids)].tolist() == ids and lens == len(t.prompt_ids)
        assert any(advantage == pytest.approx(r) for r in expected[(tuple(t.prompt_ids), tuple(t.response_ids))])  # REINFORCE


def test_learner_prompt_data_is_oats_budget_and_stores_nothing(gloo, tokenizer):
    args = make_args(max_train=50_000, rollout_batch_size=16, rollout_batch_size_per_device=16)  # oat's default budget
    learner = make_learner(args)
    tracemalloc.start()
    try:
        learner.prepare_data(DeepspeedStrategy(args=args), tokenizer)
        assert len(learner.prompts_dataset) == args.max_train, "oat sizes its learning-rate schedule by this length"
        processed, raw, refs = next(iter(learner.prompts_dataloader))  # DistributedSampler lists the indices
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(learner.prompts_dataloader) == args.max_train // 16
    assert len(processed) == len(raw) == len(refs) == 16
    assert peak < 16 * 2**20, f"prepare_data and the first batch allocated {peak / 2**20:.0f} MiB"


def test_transitions_mark_format_errors_and_cut_turns(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["no idea at all, sorry, really none", "\\boxed{10}"])
    core = asyncio.run(run_episode(make(ENV_ID), policy, tokenizer, seed=0, max_turns=2, sampling=SamplingParams(max_new_tokens=4)))
    transitions = oat_transitions(core, tokenizer)
    assert [t.action_is_formatted for t in transitions] == [not i.get("format_error", False) for i in core.infos]
    assert transitions[0].response_is_truncated and len(transitions[0].response_ids) == 4
    assert transitions[-1].done


def test_unfinished_or_logprob_free_episodes_are_refused(tokenizer):
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    core = asyncio.run(run_episode(make(ENV_ID), policy, tokenizer, seed=0))
    unfinished = copy.deepcopy(core)
    unfinished.terminated = unfinished.truncated = False
    with pytest.raises(ValueError, match="done=True"):
        oat_transitions(unfinished, tokenizer)
    no_logprobs = copy.deepcopy(core)
    no_logprobs.metrics["has_logprobs"] = False
    with pytest.raises(ValueError, match="logprobs=1"):
        oat_transitions(no_logprobs, tokenizer)


def test_unknown_env_id_fails_on_the_first_collection(tokenizer):
    actor = make_actor(ScriptedPolicy(tokenizer, ACTIONS), tokenizer, env_id="game:GuessTheNumbr-v0")
    with pytest.raises(UnknownEnvError, match="GuessTheNumber-v0"):
        actor.step()


@pytest.mark.parametrize(
    "overrides, message",
    [({"max_turns": 0}, "GemArgsMixin: max_turns=0 must be a positive whole number of turns, or None."),
     ({"max_total_tokens": 0}, "GemArgsMixin: max_total_tokens=0 must be a positive whole number, or None."),
     ({"system_prompt": 5}, "GemArgsMixin: system_prompt=5 must be a str, or None."),
     ({"num_env": 0}, "GemArgsMixin: num_env=0 must be a positive whole number.")],
)
def test_bad_episode_args_fail_on_the_first_collection_naming_the_flag(tokenizer, overrides, message):
    # Before: system_prompt=5 was a TypeError inside the chat template, max_turns=0 named EpisodeSession, num_env=0 never returned.
    policy = ScriptedPolicy(tokenizer, ACTIONS)
    actor = make_actor(policy, tokenizer, **overrides)
    with pytest.raises(ValueError) as error:
        actor.step()
    assert str(error.value) == message


@pytest.mark.parametrize("version", ["0.1.4", "0.2.1", "0.3.0"])
def test_oat_without_the_multi_turn_hook_fails_with_the_install_line(monkeypatch, version):
    monkeypatch.setattr(framework_version.metadata, "version", lambda name: version)
    with pytest.raises(OatVersionError, match=r'pip install -e "\.\[oat\]"'):
        actor_module.check_oat_version()


def test_supported_oat_passes_the_check():
    assert actor_module.check_oat_version().startswith("0.2.")
