"""The Python sandbox and the code grader on Ray (:mod:`gem_core.tools.sandbox.ray_pool`): on a local
three-node cluster (conftest.py) where only ``sandbox_node`` advertises ``gem_sandbox``, every snippet,
tool call and code test runs there, isolated by bubblewrap as locally; the tool and the env keep their
API (one ``sandbox_backend`` switch)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from ci_guard import skip_unless_ci

from gem_core.tools.python import PythonTool
from gem_core.tools.sandbox import SandboxUnavailableError, available_modes, run_python
from gem_core.tools.sandbox.ray_pool import RaySandboxPool, _forget_default_pool
from gem_core.tools.tool import ToolCall

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _bubblewrap():
    if "bwrap" not in available_modes():
        skip_unless_ci("bubblewrap is not usable here (apt-get install -y bubblewrap)")


@pytest.fixture
def ray_sandbox(ray_cluster, monkeypatch):
    """The default Ray sandbox pool of this process, for this cluster."""
    _forget_default_pool()
    monkeypatch.setenv("GEM_SANDBOX_BACKEND", "ray")
    yield ray_cluster
    _forget_default_pool()


def test_snippets_run_on_the_labelled_node_in_bubblewrap(ray_sandbox):
    results = [run_python(f"print({i} * 7)") for i in range(4)]
    assert [r.stdout for r in results] == [f"{i * 7}\n" for i in range(4)]
    assert {r.node for r in results} == {ray_sandbox.sandbox_node.node_id}
    assert {r.mode for r in results} == {"bwrap"}
    # The isolation is the node's sandbox: no network, none of the project's files.
    project_file = Path(__file__).resolve().parents[3] / "pyproject.toml"
    assert project_file.exists()
    probe = run_python(f"import os, socket\nprint(os.path.exists({str(project_file)!r}), len(socket.if_nameindex()))")
    assert probe.stdout.split() == ["False", "1"] and probe.node == ray_sandbox.sandbox_node.node_id


def test_run_python_stays_local_without_the_switch(ray_cluster, monkeypatch):
    monkeypatch.delenv("GEM_SANDBOX_BACKEND", raising=False)
    assert run_python("print(1)").node is None
    with pytest.raises(ValueError, match="GEM_SANDBOX_BACKEND"):
        monkeypatch.setenv("GEM_SANDBOX_BACKEND", "slurm")
        run_python("print(1)")


async def test_the_python_tool_routes_to_ray_with_one_switch(ray_cluster, monkeypatch):
    monkeypatch.delenv("GEM_SANDBOX_BACKEND", raising=False)
    _forget_default_pool()
    tool = PythonTool(sandbox_backend="ray")
    call = ToolCall(tool="python", content="print(sum(range(10)))", span=(0, 0))
    results = await asyncio.gather(*(tool.aexecute(call) for _ in range(6)))
    assert all(r.ok and "45" in r.observation for r in results)
    assert {r.info["sandbox_node"] for r in results} == {ray_cluster.sandbox_node.node_id}
    assert tool.execute(call).info["sandbox_node"] == ray_cluster.sandbox_node.node_id
    _forget_default_pool()


def test_the_code_env_grades_on_the_labelled_node(ray_cluster, tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    from gem_core.registry import make

    monkeypatch.delenv("GEM_SANDBOX_BACKEND", raising=False)
    _forget_default_pool()
    rows = tmp_path / "rows.jsonl"
    tests = {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]}
    rows.write_text(json.dumps({"problem": "Print a + b.", "tests": json.dumps(tests)}) + "\n")
    pool = RaySandboxPool()
    before = pool.calls_per_node()
    env = make("code:CodeContest", data_files=str(rows), sandbox_backend="ray")
    env.reset(seed=0)
    _, reward, *_ , info = env.step("```python\na, b = map(int, input().split())\nprint(a + b)\n```")
    assert reward == 1.0 and info["tests_passed"] == 2
    after = pool.calls_per_node()
    ran = {node: after[node] - before.get(node, 0) for node in after}
    assert ran == {ray_cluster.sandbox_node.node_id: 2}
    _forget_default_pool()


def test_no_labelled_node_is_a_clear_error(ray_cluster):
    with pytest.raises(SandboxUnavailableError, match="gem_sandbox_nowhere"):
        RaySandboxPool("gem_sandbox_nowhere")


def test_a_call_on_a_node_that_dies_runs_again_on_another_labelled_node(ray_cluster):
    from concurrent.futures import ThreadPoolExecutor

    doomed = ray_cluster.cluster.add_node(num_cpus=1, resources={"gem_sandbox": 2}, node_ip_address="127.0.0.1")
    ray_cluster.cluster.wait_for_nodes()
    pool = RaySandboxPool()
    assert set(pool.node_ids()) == {ray_cluster.sandbox_node.node_id, doomed.node_id}
    slow = "import time\ntime.sleep(3)\nprint('done')"
    with ThreadPoolExecutor(2) as executor:
        calls = [executor.submit(pool.run_python, slow, timeout=30) for _ in range(2)]  # one per node
        time.sleep(1.5)
        assert pool.calls_per_node()[doomed.node_id] == 1  # one call is running on the doomed node
        ray_cluster.cluster.remove_node(doomed)
        results = [call.result(timeout=120) for call in calls]
    assert [r.stdout for r in results] == ["done\n", "done\n"]
    assert {r.node for r in results} == {ray_cluster.sandbox_node.node_id}
    assert pool.node_ids() == [ray_cluster.sandbox_node.node_id]


def test_math_grades_run_on_the_labelled_node(ray_cluster):
    """The pool runs any module:function call; math grading passes its own grade (local on the node)."""
    pytest.importorskip("math_verify")
    pool = RaySandboxPool()
    before = pool.calls_per_node()
    target = "gem_core.envs.math.grading:grade"
    verdicts = [pool.call(target, prediction, "\\frac{1}{2}", backend="local") for prediction in ("0.5", "\\frac{2}{4}", "\\frac{1}{3}")]
    assert [v.correct for v in verdicts] == [True, True, False]
    after = pool.calls_per_node()
    assert {node: after[node] - before.get(node, 0) for node in after} == {ray_cluster.sandbox_node.node_id: 3}


def test_the_math_env_grades_on_the_labelled_node_with_the_switch(ray_sandbox):
    """GEM_SANDBOX_BACKEND=ray (set by the fixture) also routes math grading that needs a worker."""
    pytest.importorskip("math_verify")
    from gem_core.envs.math.grading import grade

    pool = RaySandboxPool()
    before = pool.calls_per_node()
    assert grade("(x+1)^2", "x^2+2x+1").correct  # symbolic: needs math-verify in a grading worker
    assert grade("3", "3").correct  # exact numbers are graded here, without a round trip
    after = pool.calls_per_node()
    assert {node: after[node] - before.get(node, 0) for node in after} == {ray_sandbox.sandbox_node.node_id: 1}
