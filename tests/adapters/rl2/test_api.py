"""gem_adapters.rl2.api against the installed rl-square 0.0.2 sources, and the dataset builder.

RL2 main is not on the package registry (``RL2`` 0.0.2 there is the rl-square code), so the
``"generate"`` branch of the detection is not tested here; the README says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RL2 = pytest.importorskip("RL2", reason="needs rl-square==0.0.2 (nox -s rl2)")

from gem_adapters.rl2 import api  # noqa: E402
from gem_adapters.rl2.api import RL2VersionError, check_rl2_api, row_label  # noqa: E402
from gem_adapters.rl2.__main__ import main  # noqa: E402
from gem_adapters.rl2.make_dataset import make_dataset  # noqa: E402

RL2_ROOT = Path(RL2.__file__).parent


def test_rl_square_sources_select_the_reset_step_hook():
    rollout = (RL2_ROOT / "workers" / "rollout.py").read_text(encoding="utf-8")
    assert "self.env.reset(" in rollout and "self.env.step(" in rollout, "rl-square's loop calls reset/step"
    assert api.installed_rl2_api() == "reset_step"
    check_rl2_api("reset_step")
    with pytest.raises(RL2VersionError, match=r"rollout.env_path=\$\(python -m gem_adapters.files rl2-reset-step --path\)"):
        check_rl2_api("generate")


def test_missing_rl2_says_how_to_install(monkeypatch):
    monkeypatch.setattr(api.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RL2VersionError, match="pip install rl-square==0.0.2"):
        check_rl2_api("reset_step")


def test_dataset_rows_have_no_prompt_and_name_their_episode(tmp_path):
    out = tmp_path / "train.jsonl"
    main(["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    import gem_adapters.rl2

    assert gem_adapters.rl2.make_dataset is make_dataset and rows == make_dataset("game:GuessTheNumber-v0", 2)
    assert all("prompt" not in row for row in rows)
    assert [(row_label(r).env_id, row_label(r).seed) for r in rows] == [("game:GuessTheNumber-v0", 0), ("game:GuessTheNumber-v0", 1)]
