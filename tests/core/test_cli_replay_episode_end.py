"""`gem replay` reports a stored episode whose end no longer comes where it was stored."""

from __future__ import annotations

from gem_core.cli import main


def test_replay_reports_a_stored_end_that_the_env_no_longer_gives_and_exits_1(tmp_path, capsys):
    from gem_core import make
    from gem_core.rollout.trajectory import TokenTrajectory
    from gem_core.rollout.trajectory_io import write_trajectories

    env = make("game:GuessTheNumber-v0")
    env.reset(seed=3)
    actions = ["\\boxed{5}", "\\boxed{7}"]
    steps = [env.step(a) for a in actions]
    assert not any(terminated or truncated for _, _, terminated, truncated, _ in steps)  # the env goes on after these two
    rewards = [float(step[1]) for step in steps]
    # Stored as ended by the env after the second guess (a grader that then ended it), with the same rewards.
    trajectory = TokenTrajectory(prompt_ids=[1], response_ids=[5, 6], loss_mask=[1, 1], logprobs=[0.0] * 2,
                                 turn_spans=[(0, 1), (1, 2)], rewards=rewards, terminated=True, truncated=False,
                                 env_id="game:GuessTheNumber-v0", seed=3, actions=actions)
    stored = tmp_path / "traj.jsonl"
    write_trajectories(str(stored), [trajectory])

    assert main(["replay", str(stored)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"episode 0 turn 1: reward {rewards[1]:+g} -> {rewards[1]:+g} (the episode no longer ends here)",
        "1 episodes replayed, 1 turns changed.",
    ]
