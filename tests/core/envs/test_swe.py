"""SWE envs: ``gem swe build`` makes the pack (the real sdists, downloaded once per session), every task is
solved by its gold patch and failed by the empty patch under the real grader in the sandbox, and the
reward hacks of issue 48 score 0.

The shipped sample (GEM's own tiny package) covers the build's checks without the network; the
contract and snapshot tests over every registered id use it too (tests/core/test_env_contract.py).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from gem_core.cli import main as gem_main
from gem_core.envs.swe.build import build_pack
from gem_core.envs.swe.pack import DATA_DIR, SAMPLE_SPEC_FILE, PackNotBuiltError, SweError, load_pack
from gem_core.envs.swe.swe_env import SweEnv
from gem_core.tools.sandbox import available_modes

pytestmark = pytest.mark.skipif("bwrap" not in available_modes(), reason="the SWE grader runs in the bubblewrap sandbox")

PACK = load_pack()
TASK_IDS = [task.id for task in PACK.tasks]
#: The task the hack tests attack: inflection's tests are one fast file.
TARGET = "inflection-ordinal-13"


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@pytest.fixture(scope="session")
def swe_home(tmp_path_factory) -> Path:
    """The real pack, built once per session by the ``gem swe build`` command (the sdists come from the index)."""
    home = tmp_path_factory.mktemp("swe-home")
    # The gold and empty patches below are the build's own checks, run through the env: skip them here.
    code = gem_main(["swe", "build", "--home", str(home), "--no-verify"])
    if code != 0:
        if os.environ.get("CI"):
            pytest.fail("gem swe build failed in CI (it needs the package index)")
        pytest.skip("gem swe build failed: the package index is unreachable here")
    return home


@pytest.fixture
def env(swe_home):
    made = SweEnv(home=str(swe_home))
    yield made
    made.close()


def reset(env: SweEnv, task_id: str) -> None:
    env.reset(seed=0, options={"task": task_id})


# ----------------------------------------------------------------------------------- gold and empty


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_gold_patch_scores_full_reward(env, task_id):
    reset(env, task_id)
    mutation = env.task.mutation  # the gold patch is the mutation reversed, through the env's own tool
    replaced = env.step(call("replace", path=mutation.file, old=mutation.new, new=mutation.old))
    assert replaced[0].startswith("Replaced 1 occurrence"), replaced[0]
    observation, reward, terminated, truncated, info = env.step(call("submit"))
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True), observation
    assert info["changed"] == [mutation.file]


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_empty_patch_scores_zero(env, task_id):
    reset(env, task_id)
    observation, reward, terminated, _, info = env.step(call("submit"))
    assert (reward, terminated, info["success"], info["changed"]) == (0.0, True, False, []), observation
    assert info["tests_passed"] == len(env.task.pass_to_pass)  # only the bug's tests fail
