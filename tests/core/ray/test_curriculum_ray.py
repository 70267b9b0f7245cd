"""One task sampler for a whole Ray job (:func:`gem_core.curriculum.shared_group_starts` inside Ray): workers in
other processes and nodes that ask for the same spec reach one named actor, so the copies of a group share
a start wherever they run, every finished copy counts once, and the actor keeps the state in ``state_dir``."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest

from gem_core.curriculum import SAMPLER_STATE_FILE, RayGroupStarts, shared_group_starts
from gem_core.rollout import TokenTrajectory

# Asked without importing: without Ray, `import ray` would import this test folder (a namespace package).
_ray = importlib.util.find_spec("ray")
if _ray is None or _ray.origin is None:
    pytest.skip("Ray is not installed (the ray nox session runs these)", allow_module_level=True)
import ray  # noqa: E402
pytestmark = pytest.mark.slow

ENV_RESOURCE = "gem_env_test"  # the worker nodes' resource (conftest.py)
TASKS = ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"]


def won(env_id: str, seed: int) -> TokenTrajectory:
    return TokenTrajectory(
        prompt_ids=[1], response_ids=[2], loss_mask=[1], logprobs=[0.0], turn_spans=[(0, 1)], rewards=[1.0],
        terminated=True, truncated=False, env_id=env_id, seed=seed, infos=[{"success": True}],
    )


@ray.remote(num_cpus=0, resources={ENV_RESOURCE: 1})
def play_copy(spec: dict, key: str) -> tuple[str, str, int]:
    """A worker process (as verl's AgentLoopWorker or an OpenRLHF engine): start a copy, finish it won."""

    async def run():
        starts = shared_group_starts(spec, 2)
        start = await starts.start(key)
        trajectory = won(start.env_id, start.seed)
        await starts.finish(start, trajectory)
        return type(starts).__name__, trajectory.metrics["task"], start.seed

    return asyncio.run(run())


def test_workers_in_other_processes_share_one_sampler_actor(ray_cluster, tmp_path):
    spec = {"tasks": TASKS, "seed": 4, "min_episodes": 2, "state_dir": str(tmp_path)}
    copies = ray.get([play_copy.remote(spec, "prompt-0"), play_copy.remote(spec, "prompt-0")])
    (kind, task, seed), second = copies
    assert kind == "RayGroupStarts" and second == (kind, task, seed), "both copies of the group got one start"
    other = ray.get(play_copy.remote(spec, "prompt-1"))

    driver = shared_group_starts(spec, 2)
    assert isinstance(driver, RayGroupStarts)
    state = asyncio.run(driver.state_dict())
    assert state["draws"] == 2
    episodes = {name: data["stats"]["episodes"] for name, data in state["tasks"].items()}
    assert sum(episodes.values()) == 3 and episodes[task] >= 2
    assert other[1] != task or other[2] != seed, "a new group draws a new start"
    # Two finished copies (a group's worth) were saved by the actor; the third is not yet.
    saved = json.loads((tmp_path / SAMPLER_STATE_FILE).read_text())
    assert sum(data["stats"]["episodes"] for data in saved["tasks"].values()) == 2
