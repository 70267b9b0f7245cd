"""``gem.make``'s envs take GEM's positional ``reset(seed)`` whichever class built them: GEM's examples
call ``env.reset(random.randint(...))`` on math, reasoning-gym and game envs (train_openrlhf)."""

from __future__ import annotations

import copy
import pickle

import pytest

import gem
from gem.envs.registration import spec


@pytest.mark.parametrize("env_id", ["math:GSM8K", "game:GuessTheNumber-v0"])
def test_a_positional_seed_is_the_keyword_seed(env_id: str) -> None:
    kwargs = spec(env_id).sample_kwargs if env_id.startswith("math:") else {}
    env = gem.make(env_id, **kwargs)
    positional = env.reset(5)
    assert env.reset(seed=5) == positional
    assert env.reset(5, options=None) == positional
    assert type(env).__name__ == type(gem.make(env_id, **kwargs)).__name__


def test_the_env_stays_its_class_for_copies_and_pickles() -> None:
    env = gem.make("game:GuessTheNumber-v0")
    env.reset(3)
    base = type(env).__mro__[1]
    assert isinstance(env, base) and type(env).__qualname__ == base.__qualname__
    assert copy.deepcopy(env).reset(3) == env.reset(3)
    assert pickle.loads(pickle.dumps(env)).reset(seed=3) == env.reset(3)
