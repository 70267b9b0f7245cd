"""The ``ray`` backend on a local three-node Ray cluster (``ray.cluster_utils.Cluster``, loopback only):
the same episodes as the sync backend for the same seeds, and a node removed mid-batch ending only
the episodes of the envs it hosted (issue 18). Run by the ``ray`` nox session; skipped without Ray."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gem_core.env import Env
from gem_core.vector import make_vec

# Keep every Ray address on loopback: on Linux Ray otherwise rewrites 127.0.0.1 to the machine's
# outward address. Read when Ray is imported, and inherited by the nodes the cluster starts.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.slow

#: Envs run only on the two worker nodes, which advertise this resource; the head keeps the driver.
ENV_RESOURCE = "gem_env_test"
ENV_OPTIONS = {"num_cpus": 0, "resources": {ENV_RESOURCE: 1}, "actor_options": {"scheduling_strategy": "SPREAD"}}


class SlowCounter(Env):
    """Counts steps; the action ``"slow"`` makes a step take 3 s; ends (terminated) after 3 steps and
    draws a tag from its RNG at reset so seeding shows in the observations."""

    def __init__(self):
        self.count, self.tag = 0, -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.count, self.tag = 0, int(self.np_random.integers(1000))
        return f"start {self.tag}", {}

    def step(self, action: str):
        if action == "slow":
            time.sleep(3)
        if action == "raise":
            raise SystemExit("exit from an env")
        self.count += 1
        return f"{self.tag}:{self.count}", float(self.count), self.count >= 3, False, {"count": self.count}

    def sample_random_action(self) -> str:
        return "a"


@pytest.fixture(scope="module")
def cluster():
    # The actors unpickle SlowCounter by value: a test module is not importable in Ray's workers.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"},
    )
    workers = [
        cluster.add_node(num_cpus=1, resources={ENV_RESOURCE: 4}, node_ip_address="127.0.0.1") for _ in range(2)
    ]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()


def plain(infos: dict[str, Any]) -> dict[str, Any]:
    return {k: plain(v) if isinstance(v, dict) else np.asarray(v).tolist() for k, v in infos.items()}


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_ray_backend_gives_the_sync_backends_episodes(cluster, mode):
    runs = []
    for backend, kwargs in [("sync", None), ("ray", ENV_OPTIONS)]:
        vec = make_vec(SlowCounter, num_envs=3, backend=backend, autoreset_mode=mode, seed=11, backend_kwargs=kwargs)
        trace = [vec.reset()[0]]
        for t in range(7):
            actions = ["raise" if (t == 1 and i == 2) else "a" for i in range(3)]
            obs, rewards, terminated, truncated, infos = vec.step(actions)
            infos.pop("error", None), infos.pop("_error", None)  # the message names the backend's process
            trace.append((obs, rewards.tolist(), terminated.tolist(), truncated.tolist(), plain(infos)))
        runs.append(trace)
        vec.close()
    assert runs[0] == runs[1]


def test_envs_run_on_the_nodes_with_the_resource(cluster):
    _, workers = cluster
    vec = make_vec(SlowCounter, num_envs=4, backend="ray", backend_kwargs=ENV_OPTIONS)
    worker_ids = {node.node_id for node in workers}
    assert set(vec.backend.actor_node_ids()) <= worker_ids
    vec.close()


def test_removing_a_node_mid_batch_ends_only_its_episodes_and_the_next_batch_runs(cluster):
    ray_cluster, workers = cluster
    vec = make_vec(SlowCounter, num_envs=4, backend="ray", backend_kwargs=ENV_OPTIONS)
    vec.reset()
    nodes = vec.backend.actor_node_ids()
    victim = next(node for node in workers if node.node_id in nodes)
    on_victim = [nodes[i] == victim.node_id for i in range(4)]
    assert any(on_victim) and not all(on_victim)  # SPREAD put envs on both worker nodes

    result: dict[str, Any] = {}
    stepper = threading.Thread(target=lambda: result.setdefault("step", vec.step(["slow"] * 4)))
    stepper.start()
    time.sleep(1.0)  # every env is inside its 3 s step
    ray_cluster.remove_node(victim)
    stepper.join(120)
    assert not stepper.is_alive()
    obs, _, _, truncated, infos = result["step"]
    assert truncated.tolist() == on_victim
    for i in range(4):
        if on_victim[i]:
            assert infos["error"][i].startswith("ActorDied")
        else:
            assert obs[i].endswith(":1")
    # The lost envs were replaced on the surviving node: they restart, the others go on.
    obs, _, _, truncated, _ = vec.step(["a"] * 4)
    assert not truncated.any()
    for i in range(4):
        assert obs[i].startswith("start") if on_victim[i] else obs[i].endswith(":2")
    assert set(vec.backend.actor_node_ids()) <= {node.node_id for node in workers if node is not victim}
    vec.close()


def test_a_constructor_error_in_an_actor_propagates_as_itself_naming_the_env_id(cluster):
    with pytest.raises(ValueError, match="reverse_steps") as caught:
        make_vec(["game:Wordle-v0", "game:Sokoban-v0-easy"], max_turns=3, backend="ray", backend_kwargs=ENV_OPTIONS)
    assert "game:Sokoban-v0-easy" in "\n".join(caught.value.__notes__)
