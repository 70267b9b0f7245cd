"""The Ray sandbox node runs any ``module:function`` call (:mod:`gem_core.tools.sandbox.ray_pool`); the
actor class is plain Python, so its dispatch is tested here without a cluster (tests/core/ray runs it on one)."""

from __future__ import annotations

import pytest

from gem_core.tools.sandbox.ray_pool import RaySandboxPool, _SandboxNode


def test_a_node_runs_the_named_function_with_its_arguments_and_counts_it():
    node = _SandboxNode()
    assert node.call("operator:add", (2, 3), {}) == 5
    assert node.call("builtins:sorted", ([3, 1, 2],), {"reverse": True}) == [3, 2, 1]
    assert node.calls == 2


def test_a_node_runs_a_snippet_through_its_local_pools():
    from gem_core.tools.sandbox.ray_pool import _RUN_ON_NODE

    result = _SandboxNode().call(_RUN_ON_NODE, ("print(6 * 7)",), {"mode": "process", "timeout": 30.0})
    assert result.stdout == "42\n" and result.node is None  # the pool stamps the node id, not the snippet


@pytest.mark.parametrize("target", ["operator", "operator:", ":add", "", None, 3])
def test_a_malformed_reference_is_refused_with_the_expected_shape(target):
    with pytest.raises(ValueError, match="package.module:function"):
        _SandboxNode().call(target, (), {})
    with pytest.raises(ValueError, match="package.module:function"):
        RaySandboxPool.call(object.__new__(RaySandboxPool), target)  # refused before any node is asked


def test_an_error_of_the_function_reaches_the_caller_as_itself():
    with pytest.raises(ZeroDivisionError):
        _SandboxNode().call("operator:truediv", (1, 0), {})
