"""The vLLM route across processes: TRL's real ``VLLMGeneration.generate`` (server mode) in two ranks.

TRL's server mode gathers every rank's prompts (``gather_object``), lets the main process call the vLLM
server once, broadcasts the result and gives each rank the slice ``process_index * len(prompts)``. So
every rank must call it the same number of times with the same number of prompts, while a multi-turn
rollout's episodes end at different turns on different ranks. Here two processes joined by
``torch.distributed`` (gloo, CPU) run ``GemRolloutFunc`` against the real ``VLLMGeneration`` object
(built by its own ``__init__``, its own ``generate``); only the HTTP client to the vLLM server is a
stand-in (vLLM does not install on this CPU machine), and it answers each prompt with ids derived from
that prompt, so a rank handed another rank's slice would record the wrong turns.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

WORKER = textwrap.dedent(
    r'''
    import json, os, sys

    import torch.distributed
    from types import SimpleNamespace

    from accelerate import Accelerator
    from trl.generation.vllm_generation import VLLMGeneration

    from gem_adapters.trl import GemRolloutFunc, make_dataset
    from gem_core.rollout import ChatTemplate
    from gem_core.testing import make_tokenizer

    tokenizer = make_tokenizer("chatml")
    END = ChatTemplate.for_tokenizer(tokenizer).end_of_turn_ids
    JUNK = tokenizer.encode(" and more", add_special_tokens=False)


    def answer(prompt):
        """What the stand-in server samples for a prompt: a guess that depends on the prompt, then junk."""
        return tokenizer.encode("\\boxed{%d}" % (len(prompt) % 20 + 1), add_special_tokens=False) + END + JUNK


    class StandInVLLMClient:
        """trl.generation.vllm_client.VLLMClient.generate's return shape, without an HTTP server."""

        def __init__(self):
            self.calls = []

        def generate(self, prompts, features=None, n=1, max_tokens=16, logprobs=0, **sampling):
            self.calls.append(len(prompts))
            completions = [answer(p)[:max_tokens] for p in prompts for _ in range(n)]
            return {"prompt_ids": prompts, "completion_ids": completions,
                    "logprobs": [[[-0.25] for _ in c] for c in completions], "logprob_token_ids": None}


    def init_without_server(self):  # the only part of VLLMGeneration replaced: connecting to a vLLM server
        if self.accelerator.is_main_process:
            self.vllm_client = StandInVLLMClient()


    VLLMGeneration._init_vllm = init_without_server
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    generation = VLLMGeneration(model=None, accelerator=accelerator, processing_class=tokenizer, mode="server",
                                max_completion_length=48)
    trainer = SimpleNamespace(
        use_vllm=True, vllm_generation=generation, processing_class=tokenizer, accelerator=accelerator,
        args=SimpleNamespace(temperature=1.0, top_p=1.0, top_k=0, max_completion_length=200, chat_template_kwargs=None),
    )
    # Same batch size on both ranks (TRL's per-device batch), but rank 1's episodes last longer.
    dataset = make_dataset("game:GuessTheNumber-v0-hard", n=2, seed_start=10 * rank)
    prompts = [row["prompt"] for row in dataset for _ in range(2)]
    rollout = GemRolloutFunc(max_turns=1 + 2 * rank, max_new_tokens=16)
    rollout(prompts, trainer)
    accelerator.wait_for_everyone()

    turns_ok = all(
        t.response_ids[s:e] == answer(t.prompt_ids + t.response_ids[:s])[: e - s]
        for t in rollout.last_trajectories for s, e in t.turn_spans
    )
    print(json.dumps({
        "rank": rank,
        "turns": [t.num_turns for t in rollout.last_trajectories],
        "turns_ok": turns_ok,
        "server_calls": getattr(getattr(generation, "vllm_client", None), "calls", None),
    }), flush=True)
    # Tear the gloo group down before the interpreter does: left to interpreter shutdown, gloo's threads
    # are sometimes still joinable and libstdc++ aborts the rank ("terminate called without an active
    # exception", exit -6) after its work is done. TRL's trainer does the same at the end of training.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    '''
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_whose_episodes_end_at_different_turns_stay_in_step_with_trls_vllm_generation(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(WORKER)
    port = _free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TRL_EXPERIMENTAL_SILENCE="1",
                   OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 240  # imports take most of it; a protocol mismatch blocks forever
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert proc.returncode == 0, f"rank failed:\n{err[-3000:]}"
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    except subprocess.TimeoutExpired:
        pytest.fail("the ranks blocked in TRL's collective vLLM generate: they called it a different number of times")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    by_rank = {o["rank"]: o for o in outputs}
    assert by_rank[0]["turns"] == [1, 1, 1, 1] and by_rank[1]["turns"] == [3, 3, 3, 3]
    assert by_rank[0]["turns_ok"] and by_rank[1]["turns_ok"], "a rank got turns sampled for another rank's prompts"
    # One server call per round of rank 1's episodes, each with both ranks' (padded) prompts.
    assert by_rank[0]["server_calls"] == [8, 8, 8]
