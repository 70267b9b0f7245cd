"""Save, restore and branch: every registered env continues from a snapshot exactly as the original would.

Parametrized over ``list_envs()`` with the shipped sample data, so a newly registered env is covered
without touching this file.
"""

from __future__ import annotations

import pickle

import pytest

from gem_core import Env, list_envs, spec
from gem_core.env import STATE_FORMAT
from gem_core.wrappers import EpisodeStatistics, ObservationFormat, TurnLimit

ENV_IDS = [env_id for env_id in list_envs() if not env_id.startswith("multi:")]  # multi-agent games: tests/core/envs/test_multi_agent.py


def make_sample(env_id: str) -> Env:
    env_spec = spec(env_id)
    return env_spec.make(**env_spec.sample_kwargs)


def play(env, actions):
    """The trace of ``actions`` from the env's current state, up to the end of the episode."""
    trace = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, float(reward), terminated, truncated))
        if terminated or truncated:
            break
    return trace


def random_actions(env, k):
    return [env.sample_random_action() for _ in range(k)]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_a_restored_env_continues_exactly_as_the_original(env_id):
    env = make_sample(env_id)
    env.reset(seed=11)
    # n steps in, without ending the episode where the env allows
    for action in random_actions(env, 2):
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset(seed=12)
            break
    state = pickle.loads(pickle.dumps(env.get_state()))  # picklable, and nothing shared with the original
    later_actions = random_actions(env.spawn(), 3)  # drawn from a branch, so env's RNG stays untouched
    expected = play(env, later_actions)

    fresh = make_sample(env_id)
    fresh.set_state(state)
    assert play(fresh, later_actions) == expected
    assert fresh.np_random.bit_generator.state == env.np_random.bit_generator.state


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_a_spawned_branch_continues_like_the_original_and_leaves_it_alone(env_id):
    env = make_sample(env_id)
    env.reset(seed=5)
    branch = env.spawn(same_state=True)
    actions = random_actions(env.spawn(), 3)
    on_branch = play(branch, actions)
    assert play(env, actions) == on_branch  # the original was not advanced by the branch


def test_spawn_without_same_state_starts_a_fresh_episode_from_the_seed():
    env = make_sample("game:GuessTheNumber-v0")
    env.reset(seed=3)
    env.step("\\boxed{1}")
    fresh = env.spawn(same_state=False, seed=9)
    reference = make_sample("game:GuessTheNumber-v0")
    reference.reset(seed=9)
    assert play(fresh, ["\\boxed{4}", "\\boxed{8}"]) == play(reference, ["\\boxed{4}", "\\boxed{8}"])


def test_wrapper_stacks_save_their_own_counters_with_the_inner_env():
    def stack():
        return EpisodeStatistics(TurnLimit(ObservationFormat(make_sample("game:Wordle-v0"), "history"), max_turns=4))

    env = stack()
    env.reset(seed=2)
    env.step("\\boxed{crane}")
    state = pickle.loads(pickle.dumps(env.get_state()))
    actions = ["\\boxed{slate}", "\\boxed{pious}", "\\boxed{nymph}"]
    expected = play(env, actions)
    restored = stack()
    restored.set_state(state)
    assert play(restored, actions) == expected
    assert expected[-1][3] is True  # the turn limit (a wrapper counter) ended it in both


def test_a_state_from_another_env_or_format_is_refused_with_the_fix():
    wordle = make_sample("game:Wordle-v0")
    wordle.reset(seed=0)
    guess = make_sample("game:GuessTheNumber-v0")
    with pytest.raises(ValueError, match="restore it into an env of that class"):
        guess.set_state(wordle.get_state())
    with pytest.raises(ValueError, match=STATE_FORMAT):
        guess.set_state({"format": "gem.env_state/0", "env": "x", "attributes": {}})


def test_an_uncopyable_attribute_names_itself_and_the_fix():
    import threading

    env = make_sample("game:GuessTheNumber-v0")
    env.reset(seed=0)
    env.lock = threading.Lock()
    with pytest.raises(TypeError, match="'lock'.*state_excludes"):
        env.get_state()


def test_a_refused_wrapper_state_changes_nothing():
    """The inner env's refusal came after the wrapper had set its own attributes: the next step truncated."""
    from gem_core.errors import InvalidArgument

    source = TurnLimit(make_sample("game:GuessTheNumber-v0"), 2)
    source.reset(seed=0)
    source.step("\\boxed{1}")
    target = TurnLimit(make_sample("game:Mastermind-v0"), 50)
    target.reset(seed=0)
    before = target.get_state()
    with pytest.raises(InvalidArgument, match="restore it into an env of that class"):
        target.set_state(source.get_state())
    assert (target.max_turns, target.turn) == (50, 0) and target.get_state().keys() == before.keys()
    assert target.get_state()["attributes"] == before["attributes"]


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize(("label", "tamper"), [
    ("no attributes", lambda s: {k: v for k, v in s.items() if k != "attributes"}),
    ("attributes None", lambda s: {**s, "attributes": None}),
    ("a method", lambda s: {**s, "attributes": {**s["attributes"], "step": None}}),
    ("a property", lambda s: {**s, "attributes": {**s["attributes"], "unwrapped": None}}),
    ("a dunder", lambda s: {**s, "attributes": {**s["attributes"], "__class__": None}}),
    ("a non-name", lambda s: {**s, "attributes": {**s["attributes"], 3: None}}),
])
def test_a_malformed_snapshot_is_refused_before_anything_changes(label, tamper, wrapped):
    """set_state promises InvalidArgument for a snapshot that is not get_state's: it was a bare KeyError or
    AttributeError, and any name was set, methods included (a later step() raised TypeError)."""
    from gem_core.errors import InvalidArgument

    def build():
        env = make_sample("game:Wordle-v0")
        return TurnLimit(env, 9) if wrapped else env

    env = build()
    env.reset(seed=1)
    state = env.get_state()
    bad = {**state, "inner": tamper(state["inner"])} if wrapped and label != "a property" else tamper(state)
    target = build()
    target.reset(seed=2)
    before = target.get_state()
    with pytest.raises(InvalidArgument, match="snapshot|attribute"):
        target.set_state(bad)
    assert pickle.dumps(target.get_state()) == pickle.dumps(before)
    target.step("\\boxed{crane}")  # still a working env
