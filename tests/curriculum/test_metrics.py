"""gem_core.curriculum.metrics: success and return per task of a batch, named gem/task/<task>/..."""

from __future__ import annotations

from gem_core.curriculum import tag_task, task_metrics
from gem_core.rollout import TokenTrajectory
from gem_core.rows import EpisodeLabel


def episode(env_id: str, rewards: list[float], success: bool) -> TokenTrajectory:
    return TokenTrajectory(
        prompt_ids=[1], response_ids=[2] * len(rewards), loss_mask=[1] * len(rewards), logprobs=[0.0] * len(rewards),
        turn_spans=[(i, i + 1) for i in range(len(rewards))], rewards=rewards, terminated=True, truncated=False,
        env_id=env_id, seed=0, infos=[{}] * (len(rewards) - 1) + [{"success": success}],
    )


def test_each_task_gets_its_own_success_return_and_count():
    batch = [episode("game:A-v0", [0.0, 1.0], True), episode("game:A-v0", [0.0], False), episode("game:B-v0", [0.5], False)]
    assert task_metrics(batch) == {
        "gem/task/game:A-v0/success": 0.5, "gem/task/game:A-v0/return": 0.5, "gem/task/game:A-v0/episodes": 2.0,
        "gem/task/game:B-v0/success": 0.0, "gem/task/game:B-v0/return": 0.5, "gem/task/game:B-v0/episodes": 1.0,
    }
    assert task_metrics([]) == {}


def test_a_tagged_episode_is_counted_under_its_level():
    small = tag_task(episode("game:G-v0", [1.0], True), EpisodeLabel("game:G-v0", 3, {"max_number": 4}))
    big = tag_task(episode("game:G-v0", [0.0], False), EpisodeLabel("game:G-v0", 3, {"max_number": 8}))
    metrics = task_metrics([small, big])
    assert metrics["gem/task/game:G-v0[max_number=4]/success"] == 1.0
    assert metrics["gem/task/game:G-v0[max_number=8]/success"] == 0.0
