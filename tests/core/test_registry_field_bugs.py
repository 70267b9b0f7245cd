"""register() refuses ids no make() could build."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.game.wordle import Wordle
from gem_core.errors import InvalidArgument


def test_register_refuses_the_remote_category():
    """Before the fix register('remote:Mine-v0', ...) succeeded and was listed, but make() reads every remote: id
    as a server address, so the registered env could never be built ("Remote env id ... is malformed")."""
    with pytest.raises(InvalidArgument, match="'remote'"):
        gem_core.register("remote:Mine-v0", Wordle)
    assert "remote:Mine-v0" not in gem_core.list_envs()
