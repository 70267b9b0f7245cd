"""TRL's real ``AsyncRolloutWorker`` plays a GEM mixture against the project's stand-in for ``vllm serve``.

TRL's code here, unchanged: ``AsyncRolloutWorker`` spawns its own child process (as in training), which
builds ``_AsyncRolloutLoop`` from the pickled arguments and posts every turn to ``/v1/completions`` over
``aiohttp``; the trainer-side weight sync is TRL's ``WeightTransferClient`` over TRL's ``VLLMClient``
(``requests``): ``/init_weight_transfer_engine``, ``/pause``, ``/start_weight_update``,
``/update_weights``, ``/finish_weight_update``, ``/resume``. The server is
:class:`gem_core.serve.generation_server.GenerationServer`, a tiny ``transformers`` model on CPU.

Replaced, and only in vLLM's modules (no TRL class is touched): vLLM is not installed here, so a stub
package named ``vllm`` (written to a temporary directory on ``sys.path``) gives TRL's import check a
version (0.28.0), ``get_ip``/``get_open_port``, and the NCCL weight transfer's two trainer-side calls:
``trainer_init`` (the rendezvous) opens a :class:`~gem_core.serve.weight_stream.WeightSender` instead of
an NCCL group, and ``packed_nccl_broadcast_producer`` streams the tensors over it instead of an NCCL
broadcast. The server's side of the same transfer is the CPU path documented in the server's module.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import sys
import textwrap

import pytest
import torch

from gem_adapters.trl import environment_factories, make_dataset, with_environment_column

MIXTURE = {"game:GuessTheNumber-v0-easy": 0.5, "game:Mastermind-v0-easy": 0.5}

VLLM_STUB = {
    "__init__.py": '"""Stand-in for vLLM (not installable on CPU): what TRL\'s async GRPO imports, nothing else."""\n__version__ = "0.28.0"\n',
    "utils/__init__.py": "",
    "utils/network_utils.py": textwrap.dedent('''
        import socket

        def get_ip():
            return "127.0.0.1"

        def get_open_port():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]
    '''),
    "distributed/__init__.py": "",
    "distributed/weight_transfer/__init__.py": "",
    "distributed/weight_transfer/nccl_common.py": textwrap.dedent('''
        """vLLM's NCCL rendezvous, replaced by gem_core's CPU weight stream."""
        from types import SimpleNamespace

        from gem_core.serve.weight_stream import WeightSender

        def trainer_init(init_info):
            sender = WeightSender(init_info["master_address"], init_info["master_port"]).accept()
            sender.group = SimpleNamespace(store=None, socket=None)  # what TRL's destroy() clears
            return sender
    '''),
    "distributed/weight_transfer/packed_tensor.py": textwrap.dedent('''
        """vLLM's packed NCCL broadcast, replaced by gem_core's CPU weight stream."""

        def packed_nccl_broadcast_producer(iterator, group, src, post_iter_func):
            group.send((item[0], post_iter_func(item)) for item in iterator)
    '''),
}


@pytest.fixture
def vllm_stub(tmp_path, monkeypatch):
    """The stub ``vllm`` package on ``sys.path`` (the spawned child inherits it); removed afterwards."""
    for relative, text in VLLM_STUB.items():
        path = tmp_path / "vllm_stub" / "vllm" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "vllm_stub"))
    importlib.invalidate_caches()
    from trl.experimental.async_grpo import weight_transfer

    importlib.reload(weight_transfer)  # TRL decides at import whether vLLM is there
    yield weight_transfer
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]
    monkeypatch.undo()
    importlib.invalidate_caches()
    importlib.reload(weight_transfer)


def completion_logprobs(model, sample):
    """The log-probs ``model`` gives a sample's trained tokens (those the server sampled)."""
    ids = torch.tensor(sample.input_ids)[None]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].float().log_softmax(-1)
    picked = logits.gather(1, ids[0, 1:, None])[:, 0]
    mask = torch.tensor(sample.completion_mask[1:], dtype=torch.bool)
    return picked[mask], torch.tensor(sample.old_log_probs[1:])[mask]


def test_trls_async_rollout_worker_plays_a_gem_mixture_on_the_generation_server(vllm_stub, tiny_tokenizer, tool_tokenizer):
    from accelerate.state import PartialState
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker
    from trl.experimental.async_grpo.vllm_client import VLLMClient

    from gem_core.serve.generation_server import GenerationServer, GenerationServerConfig
    from gem_core.testing import make_model

    PartialState()  # the trainer's process has one (TRL's logger needs it)
    # make_model's models are shared across tests (read-only): the server gets a copy of its own to update.
    old, trained = make_model(tiny_tokenizer, seed=0), make_model(tiny_tokenizer, seed=1)
    served = copy.deepcopy(old)
    server = GenerationServer(served, tool_tokenizer, GenerationServerConfig(model_name="tiny", max_model_len=2048)).start()
    num_generations = 3
    worker = AsyncRolloutWorker(
        model_name="tiny", dataset=with_environment_column(make_dataset(MIXTURE, 6)), reward_funcs=[],
        processing_class=tool_tokenizer, eos_token_ids=[tool_tokenizer.convert_tokens_to_ids("<|im_end|>")],
        environment_factory=environment_factories(MIXTURE), num_generations=num_generations, max_inflight_tasks=6,
        max_tokens=12, vllm_server_url=server.url, request_timeout=60, queue_maxsize=64, child_ready_timeout=120,
    )
    names = [name for name, _ in trained.named_parameters()]
    weights = vllm_stub.WeightTransferClient(VLLMClient(server.url, server_timeout=30), {
        "names": names, "dtype_names": [str(p.dtype).split(".")[-1] for p in trained.parameters()],
        "shapes": [list(p.shape) for p in trained.parameters()],
    }, weight_sync_timeout=60)
    try:
        weights.init_weight_transfer()
        worker.start()  # spawns TRL's child process
        before = [worker.rollout_buffer.get(timeout=120) for _ in range(2 * num_generations)]
        # TRL's weight sync, in its trainer's order: pause, send, resume, then the version goes up.
        weights.pause()
        weights.send_weights(iter(trained.named_parameters()))
        weights.resume()
        worker.update_model_version(1)
        after = []
        while sum(s.model_version == 1 for s in after) < 2 * num_generations:
            after.append(worker.rollout_buffer.get(timeout=120))
            worker.check_health(stale_after_s=120)
    finally:
        worker.stop()
        weights.destroy()
        server.stop()

    assert server.weight_version == 1
    assert all(torch.equal(p, q) for p, q in zip(served.parameters(), trained.parameters()))
    samples = before + after
    by_group = {}
    for sample in samples:
        by_group.setdefault(sample.group_id, []).append(sample)
        env_id = json.loads(sample.prompt[-1]["gem"])["env_id"]
        # The env named in the row played it, and scored it in its own reward column only.
        for other in MIXTURE:
            column = sample.metrics["rewards/GemEnv_" + "".join(c if c.isalnum() else "_" for c in other)]
            assert math.isnan(column) == (other != env_id)
    # Copies of a group: one row, one env, reset with the same seed, so the same observation in the prompt.
    full = [group for group in by_group.values() if len(group) == num_generations]
    assert len(full) >= 4 and all(len({json.dumps(s.prompt) for s in group}) == 1 for group in full)
    assert {json.loads(group[0].prompt[-1]["gem"])["env_id"] for group in full} == set(MIXTURE)
    # Token ids and log-probs came from the server: those of the weights each sample's version names.
    for sample in before:
        recomputed, logged = completion_logprobs(old, sample)
        assert len(logged) > 0 and torch.allclose(recomputed, logged, atol=1e-3)
    for sample in (s for s in after if s.model_version == 1):
        recomputed, logged = completion_logprobs(trained, sample)
        assert len(logged) > 0 and torch.allclose(recomputed, logged, atol=1e-3)
    assert server.completions_served >= len(samples)


def test_trls_async_grpo_trainer_trains_against_the_generation_server(vllm_stub, tmp_path, tiny_tokenizer, tool_tokenizer,
                                                                      torch_varlen_attention, monkeypatch):
    """TRL builds its own worker (spawned) and weight client; besides the vLLM stub, two CPU stand-ins for
    TRL's GPU-only pieces: the flash-attention-3 varlen kernel (a Hub kernel) runs as torch attention, and
    ``get_peak_flops_per_device`` (asks CUDA for the device name) returns None."""
    from accelerate.state import PartialState
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer, async_grpo_trainer, packing

    from gem_core.serve.generation_server import GenerationServer, GenerationServerConfig
    from gem_core.testing import make_model

    monkeypatch.setattr(packing, "_flash_attn", lambda: torch_varlen_attention)
    monkeypatch.setattr(async_grpo_trainer, "get_peak_flops_per_device", lambda *args, **kwargs: None)
    PartialState()
    model_dir = tmp_path / "model"
    make_model(tiny_tokenizer, seed=0).save_pretrained(model_dir)
    tool_tokenizer.save_pretrained(model_dir)
    served = copy.deepcopy(make_model(tiny_tokenizer, seed=1))  # other weights until TRL's first sync
    dataset = with_environment_column(make_dataset(MIXTURE, 8))
    with GenerationServer(served, tool_tokenizer, GenerationServerConfig(max_model_len=1024)) as server:
        args = AsyncGRPOConfig(
            output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, per_device_train_batch_size=4, num_generations=2,
            max_completion_length=16, max_steps=2, max_staleness=1, learning_rate=1e-2, logging_steps=1, save_strategy="no",
            report_to=[], seed=0, vllm_server_base_url=server.url, vllm_server_timeout=30, max_inflight_tasks=4,
        )
        trainer = AsyncGRPOTrainer(model=str(model_dir), args=args, processing_class=tool_tokenizer, train_dataset=dataset,
                                   environment_factory=environment_factories(MIXTURE))
        try:
            trainer.train()
        finally:
            trainer.rollout_worker.stop()
        version = server.weight_version

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 2 and len(steps) == 2
    assert all(h["sample/staleness_max"] <= 1 for h in steps)
    # Step 1 trains on samples of the weights TRL synced at train begin: the trainer's log-probs of the
    # server's tokens are the server's log-probs (same weights, same tokens).
    assert steps[0]["ratio"] == pytest.approx(1.0, abs=1e-3) and steps[0]["kl"] == pytest.approx(0.0, abs=1e-3)
    # TRL synced at train begin and after each step; the server holds the trained weights.
    assert version == 3
    trained = dict(trainer.model.named_parameters())
    assert all(torch.equal(p, trained[name].detach()) for name, p in served.named_parameters())
