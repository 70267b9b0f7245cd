"""Ids of other standards' envs (``skyrl:<id>``) resolve to their bridge; without the bridge's extra
installed, make says which extra to install instead of calling the id unknown."""

from __future__ import annotations

import importlib.util

import pytest

from gem_core.registry import spec


def test_a_skyrl_id_resolves_to_the_skyrl_bridge():
    found = spec("skyrl:gsm8k_multi_turn")
    assert found.entry_point == "gem_core.interop.skyrl:SkyRLEnv"
    assert found.kwargs == {"skyrl_id": "gsm8k_multi_turn"} and found.extras == ("skyrl",)


@pytest.mark.skipif(importlib.util.find_spec("skyrl_gym") is not None, reason="SkyRL-Gym is installed here")
def test_without_skyrl_gym_make_names_the_extra_to_install():
    from gem_core import make

    with pytest.raises(ImportError, match=r'skyrl:gsm8k.*pip install -e "\.\[skyrl\]"'):
        make("skyrl:gsm8k", row={"prompt": "2 + 2?"})


def test_a_verifiers_id_resolves_to_the_verifiers_bridge():
    found = spec("verifiers:my_env.tasks")
    assert found.entry_point == "gem_core.interop.verifiers:VerifiersEnv"
    assert found.kwargs == {"module": "my_env.tasks"} and found.extras == ("verifiers",)


def test_registering_an_id_under_an_interop_prefix_is_refused_as_it_could_never_be_made():
    from gem_core import register

    with pytest.raises(ValueError, match=r"'skyrl:mine-v0' starts with 'skyrl':.*pick another category"):
        register("skyrl:mine-v0", lambda: None)
