"""Replay reports an end of episode that changed in either direction: one that now comes early, and one that no
longer comes where the stored episode ended."""

from __future__ import annotations

from gem_core.rollout.replay import replay_actions, replay_file, replay_trajectory
from gem_core.rollout.runner import run_episode
from gem_core.rollout.trajectory_io import write_trajectories
from gem_core.testing import ScriptedPolicy


async def test_a_stored_end_that_the_replay_goes_past_is_a_change_at_the_last_turn(tiny_tokenizer, scripted_env):
    stored = await run_episode(scripted_env(rewards=[0.0, 1.0]), ScriptedPolicy(tiny_tokenizer, ["a", "b"]), tiny_tokenizer, seed=3)
    assert stored.terminated and stored.actions == ["a", "b"]

    # The same rewards for the same two turns, but the env now goes on for a third.
    rewards, changes = replay_trajectory(stored, scripted_env(rewards=[0.0, 1.0, 0.0]))

    assert rewards == [0.0, 1.0]
    assert [(c.turn, c.stored_reward, c.replayed_reward, c.note) for c in changes] == [(1, 1.0, 1.0, "the episode no longer ends here")]


async def test_a_stored_end_that_the_replay_reproduces_is_no_change(tiny_tokenizer, scripted_env):
    stored = await run_episode(scripted_env(rewards=[0.0, 1.0]), ScriptedPolicy(tiny_tokenizer, ["a", "b"]), tiny_tokenizer, seed=3)

    assert replay_trajectory(stored, scripted_env(rewards=[0.0, 1.0])) == ([0.0, 1.0], [])


def test_an_episode_stored_without_an_end_is_not_compared_against_one(scripted_env):
    # A session's own cut (max_turns) or an unknown end: the env going on is what it did when the episode was played.
    assert replay_actions(scripted_env(rewards=[0.0, 1.0, 0.0]), 3, ["a", "b"], [0.0, 1.0], stored_terminated=False).changes == []
    assert replay_actions(scripted_env(rewards=[0.0, 1.0, 0.0]), 3, ["a", "b"], [0.0, 1.0]).changes == []


async def test_a_trajectory_file_replay_reports_the_end_that_no_longer_comes(tiny_tokenizer, scripted_env, tmp_path, monkeypatch):
    from gem_core import placement

    stored = await run_episode(scripted_env(rewards=[0.0, 1.0]), ScriptedPolicy(tiny_tokenizer, ["a", "b"]), tiny_tokenizer, seed=3,
                               env_id="game:GuessTheNumber-v0")
    path = tmp_path / "episodes.jsonl"
    write_trajectories(str(path), [stored])
    monkeypatch.setattr(placement, "make_env", lambda env_id, **kwargs: scripted_env(rewards=[0.0, 1.0, 0.0]))

    count, changes = replay_file(str(path), None)

    assert count == 1
    assert [(c.episode, c.turn, c.note) for c in changes] == [(0, 1, "the episode no longer ends here")]


def test_a_stored_termination_that_the_replay_truncates_is_a_change(scripted_env):
    class Truncating(scripted_env):
        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            return observation, reward, False, terminated or truncated, info

    changes = replay_actions(Truncating(rewards=[0.0, 1.0]), 3, ["a", "b"], [0.0, 1.0], stored_terminated=True).changes
    assert [(c.turn, c.note) for c in changes] == [(1, "the episode now ends truncated, not terminated")]
