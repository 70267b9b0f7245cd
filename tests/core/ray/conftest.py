"""A local three-node Ray cluster on loopback (``ray.cluster_utils.Cluster``) for the Ray tests: a head
that keeps the driver, worker ``env_node`` for envs, and worker ``sandbox_node``, the only node that
advertises the ``gem_sandbox`` label (and envs too). Skipped without Ray."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

# Keep every Ray address on loopback: on Linux Ray otherwise rewrites 127.0.0.1 to the machine's
# outward address. Read when Ray is imported, and inherited by the nodes the cluster starts.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

#: Envs run only on the worker nodes, which advertise this resource; the head keeps the driver.
ENV_RESOURCE = "gem_env_test"
#: The sandbox label: only ``sandbox_node`` has it.
SANDBOX_RESOURCE = "gem_sandbox"


class RayCluster:
    def __init__(self, cluster, env_node, sandbox_node):
        self.cluster, self.env_node, self.sandbox_node = cluster, env_node, sandbox_node


def ray_installed() -> bool:
    """Whether the real Ray is installed, asked without importing anything: without it, ``import ray`` would
    import this test folder as a namespace package and leave it in ``sys.modules`` for every later test."""
    spec = importlib.util.find_spec("ray")
    return spec is not None and spec.origin is not None


@pytest.fixture(scope="session")
def ray_cluster():
    if not ray_installed():  # here, not at import: a conftest cannot skip (the core session has no Ray)
        pytest.skip("Ray is not installed (the ray nox session runs these)")
    import ray
    import ray.cluster_utils as cluster_utils
    # The actors unpickle test envs by value: test modules are not importable in Ray's workers.
    here = os.path.dirname(os.path.abspath(__file__))
    for module in list(sys.modules.values()):
        if os.path.dirname(os.path.abspath(getattr(module, "__file__", None) or "/")) == here:
            ray.cloudpickle.register_pickle_by_value(module)
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"},
    )
    env_node = cluster.add_node(num_cpus=1, resources={ENV_RESOURCE: 4}, node_ip_address="127.0.0.1")
    sandbox_node = cluster.add_node(
        num_cpus=1, resources={ENV_RESOURCE: 4, SANDBOX_RESOURCE: 2}, node_ip_address="127.0.0.1"
    )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        yield RayCluster(cluster, env_node, sandbox_node)
    finally:
        ray.shutdown()
        cluster.shutdown()
