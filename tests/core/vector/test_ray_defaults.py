"""The ``ray`` backend's defaults fit the cluster it joins (issue 47, item 19): on a 2-CPU cluster
(``ray.cluster_utils.Cluster``, loopback only) ``make_vec`` of three games with no backend options runs,
their envs grouped over one actor per free CPU, while envs that may block keep an actor each. The shape
rule itself is checked without Ray. The cluster tests run in the ``ray`` nox session; skipped without Ray."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

import pytest

from gem_core.env import Env
from gem_core.vector import make_vec
from gem_core.vector.ray_backend import default_actor_shape

# Keep every Ray address on loopback: on Linux Ray otherwise rewrites 127.0.0.1 to the machine's
# outward address. Read when Ray is imported, and inherited by the nodes the cluster starts.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

CLUSTER_CPUS = 2


@pytest.mark.parametrize(
    ("num_envs", "blocking", "free_cpus", "expected"),
    [
        (3, False, 2.0, (2, 1.0)),  # the call: two actors of one CPU each
        (3, False, 16.0, (1, 1.0)),  # room for all: an actor per env
        (5, False, 0.5, (5, 0.5)),  # half a CPU free: one actor, asking for that half
        (4, False, 0.0, (4, 0.0)),  # nothing free: one actor that asks for nothing
        (3, True, 2.0, (1, 0.6666)),  # blocking: an actor each, sharing the two CPUs (rounded down)
        (2, True, 8.0, (1, 1.0)),
    ],
)
def test_default_actor_shape_never_asks_for_more_cpus_than_are_free(num_envs, blocking, free_cpus, expected):
    envs_per_actor, num_cpus = default_actor_shape(num_envs, blocking, free_cpus)
    assert (envs_per_actor, num_cpus) == pytest.approx(expected)
    actors = -(-num_envs // envs_per_actor)
    assert actors * num_cpus <= free_cpus + 1e-9


def test_a_given_envs_per_actor_is_kept_and_the_cpu_share_is_for_its_actors():
    assert default_actor_shape(4, False, 2.0, envs_per_actor=1) == (1, 0.5)


class PidEnv(Env):
    """An env that may block (the default ``Env.blocking``) and reports the process it lives in."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return f"pid {os.getpid()}", {}

    def step(self, action: str):
        return f"pid {os.getpid()}", 0.0, True, False, {}

    def sample_random_action(self) -> str:
        return "a"


@pytest.fixture(scope="module")
def two_cpu_cluster():
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        pytest.skip("Ray is not installed (the ray nox session runs these)")
    import ray
    import ray.cluster_utils as cluster_utils

    if ray.is_initialized():  # another module's cluster: its CPU count is not this test's
        pytest.fail("Ray is already connected to another cluster; run this module on its own or before the tests in tests/core/ray.")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # PidEnv: test modules do not import in Ray's workers
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": CLUSTER_CPUS, "include_dashboard": False, "node_ip_address": "127.0.0.1"},
    )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources()["CPU"] == CLUSTER_CPUS
        deadline = time.monotonic() + 60  # Ray's view of free resources follows the cluster's with a lag
        while ray.available_resources().get("CPU", 0) < CLUSTER_CPUS and time.monotonic() < deadline:
            time.sleep(0.1)
        yield ray
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow
def test_make_vec_of_three_games_with_default_options_runs_on_a_two_cpu_cluster(two_cpu_cluster):
    # Before issue 47 each env's actor asked for a whole CPU: the third never started (start_timeout, 120 s).
    vec = make_vec("game:GuessTheNumber-v0", num_envs=3, backend="ray")
    try:
        obs, _ = vec.reset()
        expected_obs, _ = make_vec("game:GuessTheNumber-v0", num_envs=3).reset()
        assert list(obs) == list(expected_obs)
        _, rewards, terminated, truncated, infos = vec.step(["\\boxed{10}"] * 3)
        assert len(rewards) == 3 and not truncated.any() and "error" not in infos
        # Grouped like the process backend's workers: one actor per CPU, a whole CPU each.
        assert (vec.backend.envs_per_actor, vec.backend.num_cpus, len(vec.backend.actors)) == (2, 1.0, 2)
    finally:
        vec.close()


@pytest.mark.slow
def test_envs_that_may_block_get_an_actor_each_on_a_two_cpu_cluster(two_cpu_cluster):
    vec = make_vec(PidEnv, num_envs=3, backend="ray")
    try:
        obs, _ = vec.reset()
        assert len(vec.backend.actors) == 3 and vec.backend.envs_per_actor == 1
        assert len(set(obs)) == 3, f"each env in a process of its own: {list(obs)}"
        assert vec.backend.num_cpus * 3 <= CLUSTER_CPUS
    finally:
        vec.close()
