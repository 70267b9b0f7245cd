"""GEM's released package and ``import gem`` serve the same ReasoningGym puzzles under the same ``rg:`` id.

Before stop 67, ``import gem`` built the core's ReasoningGym env for ``rg:*`` ids: another pool of puzzles
(10,000 of its own seed, not GEM's 500 of seed 42), an answer-tag hint appended, -0.1 for an answer without a box
where GEM pays 0, and an episode that ended ``(True, False)`` where GEM's ends ``(True, True)``. Both sides play the
same seeded episodes (a boxed guess, an unboxed one, an empty action) through ``play_scripts.py``, each in its
own interpreter; GEM's virtualenv has GEM's own reasoning-gym pin (the ``gem_upstream`` nox session installs it).
"""

from __future__ import annotations

import os
import sys

import pytest

from test_side_by_side import _play

RG_IDS = ("rg:simple_equations", "rg:basic_arithmetic", "rg:leg_counting")
SEEDS = (None, 0, 5, 123)
ACTIONS = (["\\boxed{3}"], ["3"], [""], ["The answer is \\boxed{12} or \\boxed{7}"])


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict]]:
    python = os.environ.get("GEM_UPSTREAM_PYTHON")
    if not python:
        pytest.skip("needs GEM 0.1.0 in its own virtualenv: run `nox -s gem_upstream`")
    episodes = [{"id": env_id, "seed": seed, "actions": actions}
                for env_id in RG_IDS for seed in SEEDS for actions in ACTIONS]
    cwd = str(tmp_path_factory.mktemp("play_rg"))
    return _play(os.path.abspath(python), episodes, cwd), _play(sys.executable, episodes, cwd)


def test_rg_ids_serve_gems_puzzles_rewards_and_endings(played: tuple[list[dict], list[dict]]) -> None:
    theirs, ours = played
    assert theirs and all("error" not in r for r in theirs), [r for r in theirs if "error" in r][:1]
    for upstream, here in zip(theirs, ours, strict=True):
        where = f"{upstream['id']} seed {upstream['seed']}"
        assert here.get("error") == upstream.get("error"), where
        assert here.get("reset") == upstream.get("reset"), f"{where}: reset"
        assert here.get("steps") == upstream.get("steps"), f"{where}: steps"
