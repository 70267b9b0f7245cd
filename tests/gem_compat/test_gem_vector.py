"""``gem.make_vec`` returns GEM's vector env: infos as a list of dicts, ``.envs``/``.env_ids``, dict-of-actions
steps that return the active envs only, ``use_mp``; GEM's constructor hints (``load_from_cache_file``)."""

from __future__ import annotations

import pytest

import gem

IDS = ["game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy", "game:TowerofHanoi-v0-easy"]


def test_infos_are_one_dict_per_env_and_envs_and_env_ids_are_listed() -> None:
    vec = gem.make_vec(IDS)
    observations, infos = vec.reset(seed=3)
    assert vec.env_ids == IDS and len(vec.envs) == 3
    assert vec.envs[0].game_number == 4  # GEM 0.1.0 draws 4 for seed 3 (env 0 is seeded 3 + 0)
    assert isinstance(infos, list) and infos[2]["suffix"].startswith("Here is the current state of the tower")
    assert infos[1] == {}  # GEM's Mastermind starts with no suffix
    observations, rewards, terminated, truncated, infos = vec.step(["\\boxed{99}", "\\boxed{1 2}", "\\boxed{A C}"])
    assert len(observations) == 3 and infos[2]["suffix"].count("C: [1]") == 1
    vec.close()


def test_a_dict_of_actions_steps_those_envs_and_returns_only_them() -> None:
    vec = gem.make_vec(IDS)
    vec.reset(seed=3)
    observations, rewards, terminated, truncated, infos = vec.step({2: "\\boxed{A C}", 0: "\\boxed{99}"})
    assert observations == [
        "At turn 1, you moved disk 1 from tower A to tower C.",
        "At turn 1, you guessed 99, which is outside the range specified.",
    ]
    assert rewards.shape == terminated.shape == truncated.shape == (2,) and len(infos) == 2
    assert "tower" in infos[0]["suffix"] and infos[1]["suffix"] == "Enter your next guess."
    vec.close()


def test_use_mp_runs_the_same_episodes_in_worker_processes() -> None:
    def play(use_mp: bool) -> list:
        vec = gem.make_vec([IDS[1], "game:GuessTheNumber-v0"], use_mp=use_mp)  # the second is the core's game
        assert vec.backend_name == ("process" if use_mp else "sync")
        trace = [vec.reset(seed=5)[0]]
        trace.append(vec.step(["\\boxed{1 2}", "\\boxed{3}"])[:1])
        vec.close()
        return trace

    assert play(True) == play(False)


def test_envs_of_a_process_backend_name_the_fix() -> None:
    vec = gem.make_vec(IDS[:1], use_mp=True)
    with pytest.raises(AttributeError, match="get_attr"):
        vec.envs  # noqa: B018
    vec.close()


def test_load_from_cache_file_is_accepted() -> None:
    env = gem.make("game:GuessTheNumber-v0", load_from_cache_file=False)  # the core's game, which does not take it
    assert env.reset(seed=3)[0]


@pytest.mark.parametrize("env_id", ["math:GSM8K", "rg:leg_counting"])
def test_use_mp_is_accepted_by_make(env_id: str) -> None:
    # GEM's tinker example: gem.make(env_id, seed=..., use_mp=False) (GEM's math envs grade in a process
    # pool unless told not to; the core's envs grade their own way)
    from gem.envs.registration import spec

    kwargs = spec(env_id).sample_kwargs if env_id.startswith("math:") else {"size": 5}
    env = gem.make(env_id, seed=3, use_mp=False, **kwargs)
    assert isinstance(env.reset()[0], str)
