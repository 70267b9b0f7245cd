"""GEM envs in TRL's asynchronous GRPO (``trl.experimental.async_grpo``) through its ``environment_factory``.

TRL's ``AsyncRolloutWorker`` pickles its loop's arguments (``environment_factory`` among them) into a
spawned process that runs ``_AsyncRolloutLoop``. Here that loop is TRL's real class, built from the
pickled arguments exactly as the child builds it, and run on this test's event loop: its generate loop
(dataset rows repeated ``num_generations`` times, envs drawn from a pool and reset with the row, the
dict form selecting the env by the row's ``environment`` column, tools parsed and called, ``get_reward``
scored) and its score loop (group advantages, one reward column per env class). Only the HTTP call to
vLLM (``_generate_one_turn``) is replaced: a random tiny model never emits a tool call, so each turn is
a scripted reply (a tool call, then a final answer). The spawned process, the vLLM server and the
trainer's flash-attention forward are not exercised here.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import queue
import threading
from types import SimpleNamespace

import pytest

from gem_adapters.trl import GemToolEnvironment, environment_factories, environment_factory, make_dataset, with_environment_column

MIXTURE = {"game:GuessTheNumber-v0-easy": 0.5, "game:Mastermind-v0-easy": 0.5}


def test_environment_classes_pickle_for_the_async_workers_process():
    one = environment_factory("game:GuessTheNumber-v0-easy", max_turns=3)
    again = pickle.loads(pickle.dumps(one))
    assert issubclass(again, GemToolEnvironment) and again.__name__ == one.__name__
    assert (again.env_id, again.env_kwargs) == ("game:GuessTheNumber-v0-easy", {"max_turns": 3})
    env = again()
    env.reset(seed=4)
    assert "reward" in env.act("\\boxed{3}")
    assert pickle.loads(pickle.dumps(GemToolEnvironment)) is GemToolEnvironment
    factories = pickle.loads(pickle.dumps(environment_factories(MIXTURE)))
    assert {name: cls.env_id for name, cls in factories.items()} == {name: name for name in MIXTURE}


def test_environment_column_names_each_rows_env():
    dataset = with_environment_column(make_dataset(MIXTURE, 6))
    labels = [json.loads(row["prompt"][-1]["gem"])["env_id"] for row in dataset]
    assert dataset["environment"] == labels and set(labels) == set(MIXTURE)


async def test_trls_async_rollout_loop_plays_a_gem_mixture_with_groups_sharing_env_and_seed(tool_tokenizer, monkeypatch):
    from accelerate.state import PartialState
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

    PartialState()  # as TRL's child process does first (its logger needs it)

    resets = []
    real_reset = GemToolEnvironment.reset

    def recording_reset(self, **row):
        out = real_reset(self, **row)
        resets.append((type(self).env_id, row["prompt"][-1]["gem"]))  # list.append: safe from TRL's tool threads
        return out

    monkeypatch.setattr(GemToolEnvironment, "reset", recording_reset)
    num_generations = 3
    dataset = with_environment_column(make_dataset(MIXTURE, 4))
    end = tool_tokenizer.convert_tokens_to_ids("<|im_end|>")
    # What AsyncRolloutWorker sends to its child: it must pickle (the worker refuses otherwise).
    loop_kwargs = pickle.loads(pickle.dumps(dict(
        model_name="tiny", dataset=dataset, reward_funcs=[], processing_class=tool_tokenizer, eos_token_ids=[end],
        environment_factory=environment_factories(MIXTURE), num_generations=num_generations, max_inflight_tasks=6,
        max_tokens=64, fork_threshold_tokens=1024,
    )))
    buffer, metrics = queue.Queue(), queue.Queue()
    loop = _AsyncRolloutLoop(
        **loop_kwargs, rollout_buffer=buffer, model_version_value=SimpleNamespace(value=0), heartbeat_value=SimpleNamespace(value=0.0),
        failed_event=threading.Event(), exception_info_queue=queue.Queue(), metrics_queue=metrics,
    )
    loop._loop.close()  # the child's own event loop; this test runs the loops on its own

    call = '<tool_call>\n{"name": "act", "arguments": {"action": "\\\\boxed{3}"}}\n</tool_call><|im_end|>'

    async def scripted_turn(prompt_ids):
        text = "I am done.<|im_end|>" if "<tool_response>" in tool_tokenizer.decode(prompt_ids) else call
        ids = tool_tokenizer.encode(text, add_special_tokens=False)
        return ids, [-0.5] * len(ids)

    loop._generate_one_turn = scripted_turn
    stop = asyncio.Event()
    wanted = 4 * num_generations  # four groups: every row of the dataset once

    async def stop_when_full():
        while buffer.qsize() < wanted:
            await asyncio.sleep(0.02)
        stop.set()

    await asyncio.wait_for(asyncio.gather(loop._generate_loop(stop), loop._score_loop(stop), stop_when_full()), timeout=120)
    loop._tool_pool.shutdown(wait=True)
    samples = [buffer.get_nowait() for _ in range(wanted)]

    # Copies of a group reset the same env with the same row (so the same seed): TRL compares like with like.
    groups = [resets[i : i + num_generations] for i in range(0, wanted, num_generations)]
    assert all(len(set(group)) == 1 for group in groups)
    # The dict form: each row was played by its own env's class.
    assert all(cls_env == json.loads(label)["env_id"] for cls_env, label in resets)
    assert {cls_env for cls_env, _ in resets} == set(MIXTURE)
    # Each sample: the env answered the tool call, the model's tokens are trained, its env's reward column is filled.
    columns = {f"rewards/GemEnv_{''.join(c if c.isalnum() else '_' for c in env_id)}" for env_id in MIXTURE}
    by_group = {}
    for sample in samples:
        assert sample.model_version == 0 and sample.completion_mask.sum() > 0
        tool_messages = [m["content"] for m in sample.completion if m["role"] == "tool"]
        assert len(tool_messages) == 1 and "reward" in tool_messages[0]
        assert columns <= set(sample.metrics)
        by_group.setdefault(sample.group_id, []).append(tool_messages[0])
    # Same env, same seed, same move: every copy of a group got the same answer.
    assert all(len(set(answers)) == 1 for answers in by_group.values())
