"""A bad or misspelt key of GEM's agent-loop YAML entry fails when verl builds the loop, as one ValueError naming
the key, instead of being dropped by verl's base class (the loop then ran with defaults) or failing at the first
episode with a comparison between a str and an int."""

from __future__ import annotations

import pytest

pytest.importorskip("verl.experimental.agent_loop", reason='the verl adapter tests need `pip install -e ".[verl]"`')


def build_error(make_agent_loop, server, **entry) -> BaseException:
    """The error the loop's constructor raised (hydra wraps it in an InstantiationException, raised from it)."""
    with pytest.raises(Exception) as err:
        make_agent_loop(server, **entry)
    return err.value.__cause__ or err.value


@pytest.mark.parametrize(
    ("entry", "unknown"),
    [({"max_turn": 1}, "max_turn"), ({"max_new_token": 4}, "max_new_token"), ({"env_kwargs": {"max_turns": 2}, "max_turn": 1}, "env_kwargs, max_turn")],
)
async def test_unknown_yaml_keys_are_refused_naming_them_and_the_accepted_ones(make_agent_loop, model_server, entry, unknown):
    error = build_error(make_agent_loop, model_server, **entry)
    assert isinstance(error, ValueError)
    assert str(error) == (
        f"GemAgentLoop: unknown key(s) {unknown} in its agent loop YAML entry; it takes name, _target_, max_turns, system_prompt, "
        "max_new_tokens, reward_placement, curriculum and reward_extra_keys (env kwargs go in the dataset: make_dataset's --env-kwargs)."
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"max_turns": 0}, "GemAgentLoop: max_turns=0 must be a positive whole number of turns, or None."),
        ({"max_turns": -1}, "GemAgentLoop: max_turns=-1 must be a positive whole number of turns, or None."),
        ({"max_turns": 1.5}, "GemAgentLoop: max_turns=1.5 must be a positive whole number of turns, or None."),
        ({"max_turns": "3"}, "GemAgentLoop: max_turns='3' must be a positive whole number of turns, or None."),
        ({"max_new_tokens": 0}, "GemAgentLoop: max_new_tokens=0 must be a positive whole number, or None."),
        ({"max_new_tokens": 2.5}, "GemAgentLoop: max_new_tokens=2.5 must be a positive whole number, or None."),
        ({"max_new_tokens": "64"}, "GemAgentLoop: max_new_tokens='64' must be a positive whole number, or None."),
        ({"system_prompt": 5}, "GemAgentLoop: system_prompt=5 must be a str, or None."),
        ({"reward_extra_keys": "acc"}, "GemAgentLoop: reward_extra_keys must be a list of key names (e.g. [score, pred]), got 'acc'."),
        ({"reward_extra_keys": [1]}, "GemAgentLoop: reward_extra_keys must be a list of key names (e.g. [score, pred]), got [1]."),
    ],
)
async def test_bad_episode_options_in_yaml_fail_at_construction_naming_the_key(make_agent_loop, model_server, entry, message):
    error = build_error(make_agent_loop, model_server, **entry)
    assert isinstance(error, ValueError) and str(error) == message


async def test_the_keys_verl_passes_and_the_packaged_entry_still_build(make_agent_loop, model_server):
    loop = make_agent_loop(model_server, max_turns=2, max_new_tokens=8, system_prompt="Play.", reward_placement="episode")
    assert (loop.max_turns, loop.max_new_tokens, loop.system_prompt, loop.reward_placement) == (2, 8, "Play.", "episode")
