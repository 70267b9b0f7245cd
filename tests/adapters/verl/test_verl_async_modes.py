"""GemAgentLoop under verl's asynchronous modes, through verl's real async pieces on CPU.

A weight sync aborts an in-flight generation. What the agent loop then sees depends on the client verl
gives it:

- ``fully_async_policy`` with ``async_training.partial_rollout=True`` (its default; also verl's v1
  ``separate_async``/``colocate_async`` trainers): verl's ``FullyAsyncLLMServerClient`` resumes the
  aborted request itself (prompt + the tokens sampled so far, under the new weights) and hands the loop
  one output with ``min_global_steps``/``max_global_steps`` spanning the sync. verl's
  ``assemble_batch_from_rollout_samples`` then reads those two keys from every trajectory.
- ``fully_async_policy`` with ``partial_rollout=False``, and any plain ``LLMServerClient`` (the one
  ``one_step_off_policy``'s ``AgentLoopManager`` gets): the loop receives the partial tokens with
  ``stop_reason="aborted"``. GEM resamples that turn from the same context under the new weights (the
  env never sees the fragment), as :class:`gem_core.rollout.policy_version.VersionedPolicy` does.

Real verl here: ``FullyAsyncLLMServerClient``/``LLMServerClient`` (their ``generate`` and resume loop),
``AgentLoopWorker`` (builds the loop from the YAML, post-processes), the fully-async config
(``fully_async_ppo_trainer.yaml``), ``prepare_single_generation_data`` and
``assemble_batch_from_rollout_samples`` (the rollouter's and trainer's batch steps). Stubbed, because they
need a GPU or a Ray cluster: the vLLM server actor (:class:`ScriptedReplica`: scripted replies, reports
the weight version as verl's vLLM server does in ``extra_fields["global_steps"]``, and aborts a request
mid-turn the way vLLM's ``pause_generation`` abort does) and the global load-balancer actor
(:class:`LoopbackBalancer`, one server). The FullyAsync client waits 1 s before it resumes (verl's own sleep).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')

from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient, LLMServerClient
from verl.workers.rollout.replica import TokenOutput

import gem_core
from gem_adapters.verl import agent_loop as gem_agent_loop
from gem_core.envs.game.wordle import Wordle
from gem_core.rollout.policy import SamplingParams
from gem_core.testing import ScriptedPolicy

from conftest import AGENT_LOOP_YAML, build_agent_loop, compose_trainer_config, verl_sampling_params  # this folder is on sys.path


class _Remote:
    """A Ray actor method's ``.remote(...)``, called in-process."""

    def __init__(self, fn):
        self._fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


class ScriptedReplica:
    """Stands in for verl's vLLM server actor: ``generate.remote(...) -> TokenOutput`` with the weight version.

    Each turn's reply is ``ScriptedPolicy``'s text for it. The first request of turn ``abort_turn`` is cut
    after ``keep`` tokens with ``stop_reason="aborted"`` (a weight sync's abort) and the weights move to the
    next version. A later request whose prompt ends with those partial tokens (verl's resume) gets the rest
    of the reply; one from the turn's own context (a resample) gets the whole reply under the new version.
    """

    def __init__(self, tokenizer: Any, actions: list[str], *, abort_turn: int, keep: int):
        self.script = ScriptedPolicy(tokenizer, actions)
        self.abort_turn, self.keep = abort_turn, keep
        self.version = 0
        self.partial: list[int] | None = None
        self.replies: list[tuple[list[int], int, str]] = []  # (token ids, version, stop reason) per request
        self.generate = _Remote(self._generate)

    async def _generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any) -> TokenOutput:
        full = (await self.script.generate(list(prompt_ids), SamplingParams(max_new_tokens=10_000))).token_ids
        stop = "completed"
        if self.partial and list(prompt_ids[-len(self.partial):]) == self.partial:  # verl resumes the cut reply
            ids, self.partial = full[len(self.partial):], None
        elif self.script._turn_index(list(prompt_ids)) == self.abort_turn and self.version == 0:
            ids, stop = full[: self.keep], "aborted"
            self.partial = ids
        else:
            ids = full
        ids = ids[: int(sampling_params["max_tokens"])]
        output = TokenOutput(
            token_ids=ids,
            log_probs=[ScriptedPolicy.logprob_of(t) for t in ids] if sampling_params.get("logprobs") else None,
            stop_reason=stop,
            extra_fields={"global_steps": self.version},
        )
        self.replies.append((list(ids), self.version, stop))
        if stop == "aborted":
            self.version += 1  # the sync that aborted the request loads the next weights
        return output


class LoopbackBalancer:
    """Stands in for verl's ``GlobalRequestLoadBalancer`` Ray actor: every request goes to one replica."""

    def __init__(self, replica: ScriptedReplica):
        async def no_fields() -> list[str]:
            return []

        async def acquire(request_id: str, **_: Any) -> tuple[str, ScriptedReplica]:
            return "replica-0", replica

        self.require_acquire_fields = _Remote(no_fields)
        self.require_release_fields = _Remote(no_fields)
        self.acquire_server = _Remote(acquire)
        self.release_server = _Remote(lambda **_: None)  # fire-and-forget in verl


def fully_async_config(model_dir: str, *, partial_rollout: bool = True):
    """verl's ``fully_async_ppo_trainer`` config with the GEM overrides (README, asynchronous rollouts)."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "experimental", "fully_async_policy", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            "fully_async_ppo_trainer",
            overrides=[
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.mode=async",
                "actor_rollout_ref.rollout.n=1",
                "actor_rollout_ref.rollout.multi_turn.enable=True",  # else the rollouter renames every row single_turn_agent
                "actor_rollout_ref.rollout.calculate_log_probs=true",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}",
                f"actor_rollout_ref.model.path={model_dir}",
                "data.max_prompt_length=256",
                "data.max_response_length=160",
                f"async_training.partial_rollout={partial_rollout}",
            ],
        )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_model, tiny_tokenizer) -> str:
    path = tmp_path_factory.mktemp("tiny_model")
    tiny_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture()
def wordle_steps(monkeypatch) -> list[str]:
    """Every action the Wordle env is stepped with."""
    actions: list[str] = []
    step = Wordle.step

    def counting_step(self, action, *args, **kwargs):
        actions.append(action)
        return step(self, action, *args, **kwargs)

    monkeypatch.setattr(Wordle, "step", counting_step)
    return actions


def wordle_script(seed: int) -> tuple[list[str], str]:
    env = gem_core.make("game:Wordle-v0")
    env.reset(seed=seed)
    target = env.target
    wrong = target[:2] + "".join("z" if c == "q" else "q" for c in target[2:])
    return [f"\\boxed{{{wrong}}}", f"\\boxed{{{target}}}"], target


async def test_fully_async_partial_rollout_resume_reaches_the_trainer_batch(model_dir, tiny_tokenizer, make_row, wordle_steps):
    from verl.experimental.fully_async_policy.detach_utils import (
        RolloutSample,
        assemble_batch_from_rollout_samples,
        prepare_single_generation_data,
    )
    from verl.utils.dataset.rl_dataset import collate_fn

    config = fully_async_config(model_dir)
    actions, target = wordle_script(7)
    replica = ScriptedReplica(tiny_tokenizer, actions, abort_turn=1, keep=3)
    client = FullyAsyncLLMServerClient(config, load_balancer_handle=LoopbackBalancer(replica))
    worker = AgentLoopWorker(config, client)  # what FullyAsyncAgentLoopManager dispatches each sample to
    row = {**make_row("game:Wordle-v0", 7, index=7), "agent_name": "gem_env"}
    batch = prepare_single_generation_data(collate_fn([row]), config)  # as FullyAsyncRollouter._feed_samples
    batch.non_tensor_batch["uid"] = np.array(["uid_sample_0_1"], dtype=object)
    out = await worker.generate_sequences(batch)

    # verl resumed the cut reply under version 1; the env saw each whole action once, never the fragment.
    assert [(v, s) for _, v, s in replica.replies] == [(0, "completed"), (0, "aborted"), (1, "completed")]
    assert wordle_steps == [a for a in actions]
    extras = out.non_tensor_batch["extras"][0]
    (s1, e1), (s2, e2) = extras["turn_spans"]
    response = out.batch["responses"][0].tolist()
    assert response[s2:e2] == replica.replies[1][0] + replica.replies[2][0]  # the turn is what was sampled, across the sync
    assert out.non_tensor_batch["turn_scores"][0][-1] > 0  # solved: the resumed turn was played, not truncated
    # The trainer's batch step reads every trajectory's min/max_global_steps (today: None - None).
    sample = RolloutSample(full_batch=out, sample_id="sample_0_1", epoch=0, rollout_status={})
    final = assemble_batch_from_rollout_samples([sample], tiny_tokenizer, config)
    assert final.meta_info["fully_async/partial/total_partial_num"] == 1
    assert final.meta_info["fully_async/partial/max_partial_span"] == 1
    assert list(final.non_tensor_batch["min_global_steps"]) == [0] and list(final.non_tensor_batch["max_global_steps"]) == [1]

    # verl tells the loop only the first and last version of a resumed turn: its tokens carry the oldest.
    versions = extras["token_versions"]
    assert set(versions[s1:e1]) == {0} and set(versions[s2:e2]) == {0}
    assert extras["turn_versions"] == [[0, 0], [0, 1]]


@pytest.mark.parametrize("mode", ["plain_client", "fully_async_without_partial_rollout"])
async def test_aborted_turn_is_resampled_under_the_new_weights(mode, model_dir, tiny_tokenizer, make_row, wordle_steps, monkeypatch):
    """A plain client (one_step_off_policy's manager) or partial_rollout=False hands back the aborted turn."""

    monkeypatch.setattr(gem_agent_loop.ServerManagerPolicy, "abort_backoff_s", 0.0)  # verl waits 1 s
    actions, target = wordle_script(8)
    replica = ScriptedReplica(tiny_tokenizer, actions, abort_turn=1, keep=3)
    if mode == "plain_client":
        config = compose_trainer_config(
            ["actor_rollout_ref.rollout.name=vllm", "data.max_prompt_length=256", "data.max_response_length=160",
             "actor_rollout_ref.rollout.calculate_log_probs=true", f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}"]
        )
        client = LLMServerClient(config, load_balancer_handle=LoopbackBalancer(replica))
    else:
        config = fully_async_config(model_dir, partial_rollout=False)
        client = FullyAsyncLLMServerClient(config, load_balancer_handle=LoopbackBalancer(replica))
    loop = build_agent_loop(config, client, tiny_tokenizer)
    out = await loop.run(verl_sampling_params(config), **make_row("game:Wordle-v0", 8, index=8))

    assert [(v, s) for _, v, s in replica.replies] == [(0, "completed"), (0, "aborted"), (1, "completed")]
    assert wordle_steps == actions  # stepped once per action; the fragment never reached the env
    (s1, e1), (s2, e2) = out.extra_fields["extras"]["turn_spans"]
    assert out.response_ids[s1:e1] == replica.replies[0][0]
    assert out.response_ids[s2:e2] == replica.replies[2][0]  # what the new weights sampled, not fragment + rest
    assert out.response_logprobs[s2:e2] == pytest.approx([ScriptedPolicy.logprob_of(t) for t in replica.replies[2][0]])
    versions = out.extra_fields["extras"]["token_versions"]
    assert set(versions[s1:e1]) == {0} and set(versions[s2:e2]) == {1}  # two versions in one trajectory, per token
    assert (out.extra_fields["min_global_steps"], out.extra_fields["max_global_steps"]) == (0, 1)
    assert out.extra_fields["turn_scores"][-1] > 0 and out.extra_fields["extras"]["resampled_turns"] == 1


def one_step_off_config(model_dir: str):
    """verl's ``one_step_off_ppo_trainer`` config (``trainer.use_v1`` left at its default, true) with the GEM overrides."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "experimental", "one_step_off_policy", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            "one_step_off_ppo_trainer",
            overrides=[
                # its searchpath, file://verl/trainer/config, holds only inside verl's checkout (README's command line)
                "hydra.searchpath=[pkg://verl.trainer.config]",
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.mode=async",
                "actor_rollout_ref.rollout.n=1",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}",
                f"actor_rollout_ref.model.path={model_dir}",
                "data.max_prompt_length=256",
                "data.max_response_length=48",
            ],
        )


@pytest.mark.parametrize("mode", ["one_step_off", "fully_async"])
async def test_async_modes_merge_gem_and_single_turn_rows_in_the_legacy_worker(mode, model_dir, model_server, make_row):
    """Both experimental modes run verl's legacy AgentLoopWorker (their managers are AgentLoopManager's) while
    their configs keep ``trainer.use_v1: true``; the worker lifts the first row's ``reward_extra_info`` keys
    and reads them from every row, so a GEM row must carry the legacy keys there."""
    from test_verl_mixed_agent_loops import RewardLoopHandle, rows  # same folder, on sys.path

    config = one_step_off_config(model_dir) if mode == "one_step_off" else fully_async_config(model_dir)
    assert config.trainer.use_v1
    handle = RewardLoopHandle()
    worker = AgentLoopWorker(config, model_server, reward_loop_worker_handles=[handle])
    out = await worker.generate_sequences(rows(make_row, ["gem_env", "single_turn_agent"]))
    assert handle.calls == [1]
    assert list(out.meta_info["reward_extra_keys"]) == ["acc"]
    assert out.non_tensor_batch["acc"].tolist() == [out.non_tensor_batch["extras"][0]["metrics"]["gem_success"], 1.0]
