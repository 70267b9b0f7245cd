"""A task sampler in oat's multi-turn actor, run by oat's own ``PPOMultiTurnActor.step`` (GPU modules stubbed, see
``conftest.py``): the actor's episodes start where its sampler draws, their outcomes update it, its metrics
reach every transition's info (what oat's learner logs), and its state is written per actor and read back."""

from __future__ import annotations

import json

import pytest

from gem_core.curriculum import SAMPLER_STATE_FILE
from gem_core.testing import ScriptedPolicy, make_tokenizer
from test_actor import make_actor  # oat's real actor class with the stand-ins ActorBase.init would set up

TASKS = [
    {"env_id": "game:GuessTheNumber-v0-easy", "env_kwargs": {"max_turns": 2}},
    {"env_id": "game:Mastermind-v0-easy", "env_kwargs": {"max_turns": 2}},
]
NAMES = ["game:GuessTheNumber-v0-easy[max_turns=2]", "game:Mastermind-v0-easy[max_turns=2]"]


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer("chatml")


def curriculum_actor(tokenizer, spec: dict, actor_id: int = 0):
    actor = make_actor(ScriptedPolicy(tokenizer, ["\\boxed{1}", "\\boxed{2}"]), tokenizer, curriculum=json.dumps(spec),
                       num_env=4, rollout_batch_size_per_device=6)
    actor.actor_id = actor_id
    return actor


def test_the_actors_sampler_chooses_its_episodes_learns_from_them_and_is_logged_and_saved(tokenizer, tmp_path):
    spec = {"tasks": TASKS, "seed": 1, "min_episodes": 2, "window": 8, "state_dir": str(tmp_path)}
    actor = curriculum_actor(tokenizer, spec)
    episodes = actor.step()  # oat's step: collect_experience, then its statistics into every transition's info

    state = json.loads((tmp_path / "actor0" / SAMPLER_STATE_FILE).read_text())
    episodes_per_task = {name: state["tasks"][name]["stats"]["episodes"] for name in NAMES}
    # Every start was a draw of the sampler (whole batches of num_env), and every one of them was counted.
    assert state["draws"] % 4 == 0 and state["draws"] == sum(episodes_per_task.values()) >= len(episodes)
    assert all(count > 0 for count in episodes_per_task.values()), "this seed draws both tasks"
    assert {name: state["tasks"][name]["next_seed"] for name in NAMES} == episodes_per_task, "actor 0's seeds start at 0"
    info = episodes[0][0].info
    for name in NAMES:
        assert f"actor/gem/curriculum/{name}/probability" in info
        assert f"actor/gem/task/{name}/success" in info and f"actor/gem/task/{name}/return" in info
    assert all(t.info.keys() == info.keys() for episode in episodes for t in episode), "oat averages infos key by key"

    # A restarted actor 0 reads its state back and goes on drawing; actor 1 keeps its own, with its own seeds.
    actor.release_state_dir()  # the first run's process ended (its lock with it)
    again = curriculum_actor(tokenizer, spec)
    again.step()
    assert json.loads((tmp_path / "actor0" / SAMPLER_STATE_FILE).read_text())["draws"] > state["draws"]
    other = curriculum_actor(tokenizer, spec, actor_id=1)
    other.step()
    seeds = json.loads((tmp_path / "actor1" / SAMPLER_STATE_FILE).read_text())["tasks"]
    assert all(seeds[name]["next_seed"] >= 10**9 for name in NAMES)


def test_without_a_curriculum_the_logs_are_unchanged(tokenizer):
    actor = make_actor(ScriptedPolicy(tokenizer, ["\\boxed{1}"]), tokenizer, num_env=2, rollout_batch_size_per_device=2)
    info = actor.step()[0][0].info
    assert not any(key.startswith(("actor/gem/task/", "actor/gem/curriculum/")) for key in info)
