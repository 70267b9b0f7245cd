"""Dead code and shims removed at 0.1.0 stay removed (issue 31.7): each had no caller, or a second name
for something that has one."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_second_names_remain():
    from gem_core import registry
    from gem_core.eval import report
    from gem_core.rollout.chat_template import ChatTemplate
    from gem_core.vector.ray_env import RayEnv

    assert not hasattr(registry, "register_alias")
    assert not hasattr(ChatTemplate, "render_conversation")
    assert not hasattr(RayEnv, "acall")
    assert "episode_success" not in report.__all__ and not hasattr(report, "episode_success")  # it lives in gem_core.env


def test_no_binary_wheel_is_committed():
    tracked = subprocess.run(["git", "ls-files", "*.whl"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert tracked == []


def test_the_renamed_argument_shim_is_gone():
    import importlib.util

    assert importlib.util.find_spec("gem_core.renamed") is None
    hits = subprocess.run(["git", "grep", "-l", "renamed_argument", "--", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert [h for h in hits if h != "tests/core/test_removed_shims.py"] == []
