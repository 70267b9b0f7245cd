"""Field bugs of the oat actor and example, each found by running oat's own ``PPOMultiTurnActor`` (GPU modules
stubbed, see ``conftest.py``): empty episodes, per-actor metric keys, multi-node actor ids, the curriculum's
``state_dir`` and seeds, the example's ``--rollout_batch_size``, and ``--generate_max_length``."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from gem_adapters.oat import actor as actor_module
from gem_core.curriculum import SAMPLER_STATE_FILE, TaskError
from gem_core.errors import InvalidArgument
from gem_core.testing import ScriptedPolicy, make_tokenizer
from test_actor import ACTIONS, make_actor  # oat's real actor class with the stand-ins ActorBase.init would set up
from test_train_example import documented_command, load_example

SHORT, LONG = "game:GuessTheNumber-v0-easy[max_turns=2]", "game:Mastermind-v0-easy[max_turns=2]"
TASKS = [{"env_id": "game:GuessTheNumber-v0-easy", "env_kwargs": {"max_turns": 2}},  # a first prompt of 74 chatml tokens
         {"env_id": "game:Mastermind-v0-easy", "env_kwargs": {"max_turns": 2}}]  # one of 169


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer("chatml")


@pytest.fixture
def bounded_batches(monkeypatch):
    """Fails a collection that plays more than 50 batches (one that never ends) instead of letting it spin."""
    played = []
    real = actor_module.run_labels

    async def counted(*args, **kwargs):
        played.append(1)
        if len(played) > 50:
            raise AssertionError("collect_experience played 50 batches and is still going")
        return await real(*args, **kwargs)

    monkeypatch.setattr(actor_module, "run_labels", counted)
    return played


def curriculum_actor(tokenizer, spec: dict, actor_id: int = 0, **overrides):
    actor = make_actor(ScriptedPolicy(tokenizer, ["\\boxed{1}", "\\boxed{2}"]), tokenizer, curriculum=json.dumps(spec), **overrides)
    actor.actor_id = actor_id
    return actor


def test_a_budget_smaller_than_the_first_prompt_fails_naming_max_total_tokens(tokenizer, bounded_batches):
    """Before: every episode had 0 turns and was dropped, so collect_experience drew batches forever (never returned)."""
    actor = make_actor(ScriptedPolicy(tokenizer, ACTIONS), tokenizer, num_env=2, rollout_batch_size_per_device=2, max_total_tokens=8)
    with pytest.raises(InvalidArgument, match="max_total_tokens"):
        actor.step()
    assert len(bounded_batches) == 1 and actor.llm.batch_sizes == []


def test_episodes_with_no_turns_are_counted_in_the_episode_metrics(tokenizer, bounded_batches):
    """Before: 0-turn episodes were left out of actor/gem/* and actor/num_episodes, so success looked higher."""
    actor = curriculum_actor(tokenizer, {"tasks": TASKS, "seed": 1}, num_env=4, rollout_batch_size_per_device=6, max_total_tokens=120)
    episodes, metrics = actor.collect_experience()
    draws = actor._gem_sampler.draws
    dropped = draws - len(episodes)
    assert dropped > 0, "this seed draws the task whose prompt does not fit"
    assert metrics["actor/gem/dropped_episodes"] == dropped
    assert metrics["actor/num_episodes"] == metrics["actor/gem/episodes"] == draws
    assert metrics[f"actor/gem/task/{LONG}/episodes"] == dropped and metrics[f"actor/gem/task/{LONG}/success"] == 0.0
    assert metrics[f"actor/gem/task/{SHORT}/episodes"] == len(episodes)


def test_every_actor_returns_the_same_metric_keys_in_the_same_order(tokenizer):
    """Before: each actor returned actor/gem/task/<task>/* only for the tasks it drew, so oat's per-key all_reduce
    averaged different tasks under one key, and different key counts put the learners' collectives out of step."""
    per_actor = []
    for actor_id in (1, 2):  # one episode each: actor 1 and actor 2 draw different tasks
        actor = curriculum_actor(tokenizer, {"tasks": TASKS}, actor_id=actor_id, num_env=1, rollout_batch_size_per_device=1)
        per_actor.append(actor.collect_experience()[1])
    assert list(per_actor[0]) == list(per_actor[1]) == sorted(per_actor[0])
    for metrics in per_actor:
        undrawn = [name for name in (SHORT, LONG) if metrics[f"actor/gem/task/{name}/episodes"] == 0]
        assert len(undrawn) == 1, "each actor drew one task of the two"
        assert metrics[f"actor/gem/task/{undrawn[0]}/success"] == metrics[f"actor/gem/task/{undrawn[0]}/return"] == 0.0
        assert metrics[f"actor/gem/curriculum/{undrawn[0]}/success"] == 0.0


def test_actors_of_different_nodes_play_their_own_seeds_and_keep_their_own_state(tokenizer, tmp_path):
    """Before: oat numbers actors per node, so actor 0 of every node (--num_groups) played the same seeds and
    curriculum draws and wrote the same state_dir/actor0."""
    spec = {"tasks": TASKS, "state_dir": str(tmp_path)}
    actors = [curriculum_actor(tokenizer, spec, num_env=2, rollout_batch_size_per_device=2, num_groups=2, group_rank=group_rank,
                               gpus=8, collocate=True) for group_rank in (0, 1)]
    for actor in actors:
        actor.collect_experience()
    assert [actor._gem_sampler.seed_start for actor in actors] == [0, 8 * 10**9], "8 actors per node: node 1's first is actor 8"
    assert sorted(os.listdir(tmp_path)) == ["actor0", "actor8"]
    assert (tmp_path / "actor8" / SAMPLER_STATE_FILE).exists()
    for actor in actors:
        actor.release_state_dir()


def test_a_second_actor_given_the_same_state_dir_is_refused_naming_the_owner(tokenizer, tmp_path):
    """Before: the oat actor took no lock, so two runs with the same state_dir overwrote each other's curriculum state."""
    spec = {"tasks": TASKS, "state_dir": str(tmp_path)}
    first = curriculum_actor(tokenizer, spec, num_env=2, rollout_batch_size_per_device=2)
    first.collect_experience()
    second = curriculum_actor(tokenizer, spec, num_env=2, rollout_batch_size_per_device=2)
    with pytest.raises(TaskError, match=rf"state_dir .*actor0 is in use by .*pid {os.getpid()}"):
        second.collect_experience()
    assert second.llm.batch_sizes == []
    first.release_state_dir()
    second.collect_experience()  # the folder is free again: the second one continues the first one's curriculum
    draws = json.loads((tmp_path / "actor0" / SAMPLER_STATE_FILE).read_text())["draws"]
    assert draws == second._gem_sampler.draws > first._gem_sampler.draws
    second.release_state_dir()


@pytest.mark.parametrize("kind", ["a file", "unmakeable"])
def test_a_state_dir_that_cannot_be_written_fails_before_any_sampling(tokenizer, tmp_path, kind):
    """Before: a whole batch was sampled on vLLM first, then saving raised a raw NotADirectoryError/FileNotFoundError."""
    if kind == "a file":
        state_dir = tmp_path / "afile"
        state_dir.write_text("")
    else:  # no folder can be made in /proc, not even by root
        state_dir = "/proc/gem_no_such_state_dir"
        if not os.path.isdir("/proc"):
            pytest.skip("no /proc on this platform")
    actor = curriculum_actor(tokenizer, {"tasks": TASKS, "state_dir": str(state_dir)}, num_env=2, rollout_batch_size_per_device=2)
    with pytest.raises(TaskError, match=rf"state_dir {state_dir}"):
        actor.collect_experience()
    assert actor.llm.batch_sizes == []


@pytest.mark.parametrize(("key", "value"), [("seed", "abc"), ("seed", None), ("seed_start", "x"), ("seed", 1.5), ("seed", True),
                                            ("seed_start", "3"), ("seed_start", -1)])
def test_curriculum_seeds_must_be_whole_numbers(tokenizer, key, value):
    """Before: the actor int()ed them first: 'abc'/null raised a raw ValueError/TypeError, 1.5/true/"3" were accepted."""
    actor = curriculum_actor(tokenizer, {"tasks": TASKS, key: value}, actor_id=1, num_env=1, rollout_batch_size_per_device=1)
    with pytest.raises(TaskError, match=key):
        actor.collect_experience()
    assert actor.llm.batch_sizes == []


@pytest.mark.parametrize("value", [0, None, -3, True, 2.5])
def test_generate_max_length_must_be_a_positive_whole_number(tokenizer, value):
    """Before: 0 played episodes of empty actions (never calling vLLM) for oat to train on; None raised a raw TypeError."""
    actor = make_actor(ScriptedPolicy(tokenizer, ACTIONS), tokenizer, num_env=1, rollout_batch_size_per_device=1)
    actor.sampling_params.max_tokens = value
    with pytest.raises(InvalidArgument, match="generate_max_length"):
        actor.collect_experience()
    assert actor.llm.batch_sizes == []


def test_the_example_keeps_an_explicit_rollout_batch_size_and_counts_every_node(monkeypatch):
    """Before: --rollout_batch_size 256 became 128 (per device x gpus), and with --num_groups 2 the batch it wrote was
    not divisible by oat's learner world size (oat's learner asserts it)."""
    example = load_example(monkeypatch)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(sys, "argv", ["train_oat.py", *documented_command(), "--rollout_batch_size", "256"])
    assert example.training_args().rollout_batch_size == 256
    monkeypatch.setattr(sys, "argv", ["train_oat.py", *documented_command(), "--num_groups", "2"])
    args = example.training_args()
    assert args.rollout_batch_size == args.rollout_batch_size_per_device * args.gpus * 2
    assert args.rollout_batch_size % (args.rollout_batch_size_per_device * args.gpus * args.num_groups) == 0
