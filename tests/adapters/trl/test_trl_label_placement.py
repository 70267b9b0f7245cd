"""environment_factory's reset builds a labelled row's env through make_label_env, so a row cannot choose its placement."""

from __future__ import annotations

import json

import pytest

from gem_adapters.trl import environment_factory, make_dataset
from gem_core.rows import EnvKwargsError

ENV_ID = "game:GuessTheNumber-v0"


@pytest.mark.parametrize("placement_key", ["env_backend", "pool"])
def test_a_rows_env_kwargs_cannot_choose_the_envs_placement(monkeypatch, placement_key):
    """Before: reset() built a labelled row's env with placement.make_env(env_id, **label.env_kwargs), so a row whose
    env_kwargs held {"env_backend": "local"} overrode the job's $GEM_ENV_BACKEND (the episode left the Ray pool in silence);
    make_label_env refuses placement keywords in a label, naming them."""
    monkeypatch.delenv("GEM_ENV_BACKEND", raising=False)
    row = make_dataset(ENV_ID, 1)[0]
    label = json.loads(row["prompt"][-1]["gem"])
    label["env_kwargs"] = {placement_key: "local"}
    row["prompt"][-1]["gem"] = json.dumps(label)
    env = environment_factory()()
    with pytest.raises(EnvKwargsError, match=rf"{placement_key} would choose the env or its placement"):
        env.reset(**row)
    assert env.env is None
