"""GEM envs train in TRL's asynchronous trainer (``trl.experimental.async_grpo.AsyncGRPOTrainer``) on CPU.

What is TRL's own code here: the trainer (its rollout queue with the ``max_staleness`` filter, tree
packing, the clipped loss, the weight-sync schedule) and its rollout loop ``_AsyncRolloutLoop`` (rows
repeated ``num_generations`` times, an env pool reset with each row, the dict-form ``environment_factory``
picking the env by the ``environment`` column, tool calls parsed and run, ``get_reward`` scored, group
advantages), built from pickled arguments as TRL's spawned child builds it.

What stands in, because this CPU-only environment cannot run it (each is named where it is made):
- the child process: ``_AsyncRolloutLoop`` runs in a thread of this process (``InProcessRolloutWorker``,
  TRL's ``RolloutWorkerProtocol``); ``AsyncRolloutWorker`` itself refuses to start without vLLM installed;
- vLLM's ``/v1/completions`` (reached through ``aiohttp``, not installed here): ``_generate_one_turn`` is a
  sampler model in this process that plays scripted tool calls (a random tiny model never calls a tool)
  and returns the log-probabilities its current weights give them;
- vLLM's NCCL weight transfer: ``CpuWeightTransfer`` (TRL's ``WeightTransferProtocol``) copies the
  trainer's parameters into the sampler model, between TRL's own pause and resume calls;
- the flash-attention-3 varlen kernel of TRL's tree attention (a GPU kernel from the Hub): the same
  varlen causal attention in torch, segment by segment; ``get_peak_flops_per_device`` (asks CUDA for the
  device name) returns None; ``VLLMClient`` (needs ``requests``) is not made, the weight transfer owning
  the sync.
"""

from __future__ import annotations

import asyncio
import pickle
import queue
import random
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from gem_adapters.trl import environment_factories, make_dataset, with_environment_column

MIXTURE = {"game:GuessTheNumber-v0-easy": 0.5, "game:Mastermind-v0-easy": 0.5}
ACTIONS = {"game:GuessTheNumber-v0-easy": ["\\\\boxed{3}", "\\\\boxed{7}", "no move"],
           "game:Mastermind-v0-easy": ["\\\\boxed{1 2 3}", "\\\\boxed{4 4 1}", "no move"]}


class CpuWeightTransfer:
    """TRL's ``WeightTransferProtocol`` on CPU: the trainer's parameters are copied into the sampler."""

    def __init__(self, sampler, lock):
        self.sampler, self.lock, self.calls = sampler, lock, []

    def init_weight_transfer(self):
        self.calls.append("init")

    def pause(self):
        self.calls.append("pause")

    def send_weights(self, named_tensors):
        params = dict(self.sampler.named_parameters())
        with self.lock, torch.no_grad():
            for name, tensor in named_tensors:
                params[name].copy_(tensor)
        self.calls.append("send")

    def resume(self):
        self.calls.append("resume")

    def destroy(self):
        self.calls.append("destroy")


class InProcessRolloutWorker:
    """TRL's ``RolloutWorkerProtocol`` running TRL's ``_AsyncRolloutLoop`` in a thread (see the module docstring)."""

    def __init__(self, sampler, lock, tokenizer, **loop_kwargs):
        from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

        self.rollout_buffer, self.metrics_queue = queue.Queue(maxsize=1024), queue.Queue(maxsize=4096)
        self.version = SimpleNamespace(value=0)
        self.error = None
        self.loop = _AsyncRolloutLoop(
            **pickle.loads(pickle.dumps(loop_kwargs)),  # as AsyncRolloutWorker sends them to its child
            rollout_buffer=self.rollout_buffer, model_version_value=self.version, heartbeat_value=SimpleNamespace(value=time.time()),
            failed_event=threading.Event(), exception_info_queue=queue.Queue(maxsize=1), metrics_queue=self.metrics_queue,
        )
        rng = random.Random(0)

        async def generate_one_turn(prompt_ids):  # stands in for vLLM's /v1/completions
            text = tokenizer.decode(prompt_ids)
            if "<tool_response>" in text:
                reply = "I am done.<|im_end|>"
            else:
                env_id = next(e for e in MIXTURE if ("Mastermind" in e) == ("Mastermind" in text))
                reply = '<tool_call>\n{"name": "act", "arguments": {"action": "%s"}}\n</tool_call><|im_end|>' % rng.choice(ACTIONS[env_id])
            ids = tokenizer.encode(reply, add_special_tokens=False)
            with lock, torch.no_grad():  # the log-probabilities the sampler's current weights give these ids
                logits = sampler(input_ids=torch.tensor([list(prompt_ids) + ids])).logits[0, len(prompt_ids) - 1 : -1]
            return ids, logits.float().log_softmax(-1).gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()

        self.loop._generate_one_turn = generate_one_turn

    def start(self):
        def run():
            asyncio.set_event_loop(self.loop._loop)
            stop = self.loop._stop_event
            try:
                self.loop._loop.run_until_complete(asyncio.gather(self.loop._generate_loop(stop), self.loop._score_loop(stop)))
            except BaseException as error:  # noqa: BLE001 - reported by check_health, as the child's failure is
                self.error = error

        self.thread = threading.Thread(target=run, daemon=True, name="trl-rollout-loop")
        self.thread.start()

    def stop(self):
        self.loop._loop.call_soon_threadsafe(self.loop._stop_event.set)
        self.thread.join(timeout=60)
        self.loop._tool_pool.shutdown(wait=True)

    def update_model_version(self, model_version):
        self.version.value = int(model_version)

    def check_health(self, stale_after_s):
        if self.error is not None:
            raise RuntimeError("the rollout loop failed") from self.error


def test_async_grpo_trainer_trains_on_a_gem_mixture_within_its_staleness_bound(tmp_path, tiny_tokenizer, tool_tokenizer, monkeypatch,
                                                                              torch_varlen_attention):
    from accelerate.state import PartialState
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer, async_grpo_trainer, packing

    from gem_core.testing import make_model

    monkeypatch.setattr(packing, "_flash_attn", lambda: torch_varlen_attention)
    monkeypatch.setattr(async_grpo_trainer, "get_peak_flops_per_device", lambda *args, **kwargs: None)
    monkeypatch.setattr(async_grpo_trainer, "VLLMClient", lambda *args, **kwargs: None)
    PartialState()

    model_dir = tmp_path / "model"
    make_model(tiny_tokenizer, seed=0).save_pretrained(model_dir)
    tool_tokenizer.save_pretrained(model_dir)
    sampler, lock = make_model(tiny_tokenizer, seed=1), threading.Lock()  # other weights until the first sync
    dataset = with_environment_column(make_dataset(MIXTURE, 8))
    factories = environment_factories(MIXTURE)
    worker = InProcessRolloutWorker(
        sampler, lock, tool_tokenizer, model_name=str(model_dir), dataset=dataset, reward_funcs=[], processing_class=tool_tokenizer,
        eos_token_ids=[tool_tokenizer.convert_tokens_to_ids("<|im_end|>")], environment_factory=factories, num_generations=2,
        max_inflight_tasks=4, max_tokens=64,
    )
    weights = CpuWeightTransfer(sampler, lock)
    args = AsyncGRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=64, max_steps=2, token_budget=1024, max_staleness=1, learning_rate=1e-2, logging_steps=1,
        save_strategy="no", report_to=[], seed=0,
    )
    trainer = AsyncGRPOTrainer(model=str(model_dir), args=args, processing_class=tool_tokenizer, train_dataset=dataset,
                               environment_factory=factories, rollout_worker=worker, weight_transfer=weights)
    try:
        trainer.train()
    finally:
        worker.stop()

    assert trainer.state.global_step == 2 and worker.error is None
    steps = [h for h in trainer.state.log_history if "loss" in h]
    # Both envs of the mixture were played and scored, each in its own reward column.
    for env_id in MIXTURE:
        column = "rewards/GemEnv_" + "".join(c if c.isalnum() else "_" for c in env_id)
        assert all(column in h for h in steps)
    assert all(h["sample/staleness_max"] <= 1 for h in steps)  # TRL's bound, on versions bumped by its syncs
    # Step 1 trains on samples of the synced weights: the trainer's log-probs (tree packing, the attention
    # stand-in) are the sampler's, token for token; step 2's samples are a version old.
    assert steps[0]["ratio"] == pytest.approx(1.0, abs=1e-4) and steps[0]["kl"] == pytest.approx(0.0, abs=1e-4)
    assert any(h["grad_norm"] > 0 for h in steps)  # the moves differ within groups: non-zero advantages
    # TRL synced the weights at train begin and after each step, through the CPU path: pause, send, resume.
    assert weights.calls == ["init"] + ["pause", "send", "resume"] * 3 + ["destroy"] and worker.version.value == 3
    trained = dict(trainer.model.named_parameters())
    assert all(torch.equal(p, trained[name].detach()) for name, p in sampler.named_parameters())
