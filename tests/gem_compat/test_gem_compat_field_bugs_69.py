"""Field bugs of ``import gem`` (round 69): invalid input to GEM's ids and classes must be a GemError naming the
argument, a malformed model action GEM's format penalty, and valid input GEM's own behaviour."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gem
from gem.envs.game_env import GAME_SPECS
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType

# Sokoban-v0-hard's room search takes seconds (as in GEM); its step rule is the easy level's.
GAME_IDS = sorted(set(GAME_SPECS) - {"game:Sokoban-v0-hard"})


def _step_within(env, action, seconds: float = 10.0):
    """``env.step(action)`` run in a thread, failing the test if it has not answered within ``seconds``."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(env.step(action)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"step({action!r}) hung for {seconds} s"
    return result[0]


def test_minesweeper_refuses_more_mines_than_fit_outside_the_first_reveal() -> None:
    """num_mines=20 on a 5x5 board was accepted, and the first reveal looped for ever placing mines outside the
    revealed cell's 3x3 safe zone (only 16 cells); now make refuses it, naming num_mines and the largest value."""
    with pytest.raises(InvalidArgument, match=r"num_mines=20.*16"):
        gem.make("game:Minesweeper-v0-easy", num_mines=20)
    env = gem.make("game:Minesweeper-v0-easy", num_mines=16)  # the largest: every cell outside the safe zone
    env.reset(0)
    assert _step_within(env, "\\boxed{reveal 2 2}")[2] is False


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize("action", [None, 7])
def test_a_non_text_action_is_a_format_error_in_every_game(env_id: str, action) -> None:
    """A None (failed generation) or int action crashed GEM's games with a raw TypeError from re.findall; now it
    is GEM's malformed move: the same result as an empty text (format penalty, episode over)."""
    env, same = gem.make(env_id), gem.make(env_id)
    env.reset(0)
    same.reset(0)
    result = env.step(action)
    assert result == same.step("")
    assert isinstance(result[0], str) and result[1:3] == (-0.1, True)


def test_numpy_integer_seeds_play_the_int_seeds_episode() -> None:
    """np.int64 seeds raised a raw TypeError from random.Random.seed in GEM's games (reset and make(seed=)) and
    make_vec; now they play the same episode as the int seed."""
    by_numpy, by_int = gem.make("game:GuessTheNumber-v0-hard"), gem.make("game:GuessTheNumber-v0-hard")
    assert by_numpy.reset(np.int64(3)) == by_int.reset(3)
    assert by_numpy.game_number == by_int.game_number
    seeded = gem.make("game:GuessTheNumber-v0-hard", seed=np.int64(3))
    assert seeded.reset() == gem.make("game:GuessTheNumber-v0-hard", seed=3).reset()
    vec = gem.make_vec(["game:Mastermind-v0-easy"] * 2, seed=np.int64(3))
    vec.close()


def test_numpy_integer_seed_in_a_reasoning_gym_env() -> None:
    """rg: envs under ``import gem`` raised a raw TypeError for reset(np.int64(s)); now it is reset(s)."""
    pytest.importorskip("reasoning_gym")
    assert gem.make("rg:leg_counting").reset(np.int64(3)) == gem.make("rg:leg_counting").reset(3)


def test_observation_wrapper_max_history_length_zero_and_bad_values() -> None:
    """max_history_length=0 built a wrapper whose first step raised a raw ValueError (an unbounded observation
    queue beside an empty action queue); -1 and 1.5 raised raw ValueError/TypeError from deque. Now 0 shows only
    the current observation, and a bad value is an InvalidArgument naming max_history_length."""
    from gem.wrappers.observation_wrapper import ObservationWrapper

    for include_action in (True, False):
        env = ObservationWrapper(gem.make("game:GuessTheNumber-v0-hard"), include_action=include_action,
                                 include_chat_template=False, max_history_length=0)
        env.reset(1)
        observation, *_ = env.step("\\boxed{1}")
        assert observation.startswith("At turn 1, you guessed 1") and "\\boxed{1}" not in observation
    for value in (-1, 1.5, "2", True):
        with pytest.raises(InvalidArgument, match="max_history_length"):
            ObservationWrapper(gem.make("game:GuessTheNumber-v0-hard"), include_chat_template=False, max_history_length=value)


@pytest.mark.parametrize("seed", ["abc", -5, 1.5, True])
def test_make_and_make_vec_check_seed(seed) -> None:
    """gem.make(id, seed=...) and gem.make_vec(..., seed=...) passed a bad seed on, to fail as a raw TypeError/
    ValueError (or gymnasium's Error) deep in numpy or gymnasium; now an InvalidArgument naming seed."""
    for build in (lambda: gem.make("game:GuessTheNumber-v0-hard", seed=seed), lambda: gem.make("math:Sample", seed=seed),
                  lambda: gem.make_vec(["game:GuessTheNumber-v0-hard"], seed=seed)):
        with pytest.raises(InvalidArgument, match="seed"):
            build()


@pytest.mark.parametrize(
    ("env_id", "kwargs", "named"),
    [
        ("game:GuessTheNumber-v0-hard", {"min_number": 50, "max_number": 1}, "min_number"),
        ("game:Mastermind-v0-easy", {"code_length": 9, "num_numbers": 3}, "code_length"),
        ("game:Mastermind-v0-easy", {"code_length": 0}, "code_length"),
        ("game:Sudoku-v0-easy", {"clues": 20}, "clues"),
        ("game:Sudoku-v0-easy", {"scale": 5}, "scale"),
        ("game:Sokoban-v0-easy", {"dim_room": (3, 3)}, "dim_room"),
        ("game:Sokoban-v0-easy", {"num_boxes": 0}, "num_boxes"),
        ("game:Minesweeper-v0-easy", {"rows": 0}, "rows"),
    ],
)
def test_impossible_game_levels_are_refused_at_make(env_id: str, kwargs: dict, named: str) -> None:
    """Impossible levels failed deep inside reset with a raw ValueError/IndexError/RuntimeError (or, for Sudoku's
    clues, a pop from an empty list); now make refuses them naming the kwarg."""
    with pytest.raises(GemError, match=named):
        gem.make(env_id, **kwargs)


def test_fifteen_puzzle_random_id_builds_and_draws_its_level() -> None:
    """game:FifteenPuzzle-v0-random could not be built (num_rows=None reached num_rows**2, a TypeError); now each
    episode draws GEM's -random level (2x2/10, 3x3/20 or 4x4/50 turns), as the other -random ids do."""
    env = gem.make("game:FifteenPuzzle-v0-random")
    sizes = set()
    for seed in range(12):
        observation, _ = env.reset(seed)
        sizes.add((env.num_rows, env.max_turns))
        assert f"{env.num_rows**2 - 1}-Puzzle" in observation
    assert sizes <= {(2, 10), (3, 20), (4, 50)} and len(sizes) > 1


def test_bad_argument_types_are_named() -> None:
    """make_vec(wrappers=["concat"]) raised "'str' object is not callable"; MathEnv/QaEnv(dataset=<list of rows>)
    an AttributeError ('list' has no to_json); ToolEnvWrapper(tool_execute_error_reward="x") a TypeError from a
    comparison. Now the wrapper name is refused naming get_wrapper_fns, a list of rows is read as a dataset, and
    the reward is refused as not a finite number."""
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    with pytest.raises(InvalidArgumentType, match=r"get_wrapper_fns\('concat'\)"):
        gem.make_vec(["game:GuessTheNumber-v0-hard"], wrappers=["concat"])
    for reward in ("x", float("nan"), float("-inf")):
        with pytest.raises(InvalidArgument, match="tool_execute_error_reward"):
            ToolEnvWrapper(gem.make("math:Sample"), tools=[PythonCodeTool()], tool_execute_error_reward=reward)
    with pytest.raises(InvalidArgumentType, match="dataset"):
        gem.make("math:GSM8K", dataset=42)


def test_a_list_of_rows_is_a_dataset() -> None:
    """MathEnv/QaEnv(dataset=[{...}]) raised AttributeError: 'list' object has no attribute 'to_json'; a list of
    rows now works like datasets.Dataset.from_list(rows)."""
    pytest.importorskip("datasets")
    from gem.envs.qa_env import QaEnv

    math = gem.make("math:GSM8K", dataset=[{"problem": "1+1?", "answer": "2"}])
    assert math.reset(0)[0] == "1+1?"
    assert math.step("\\boxed{2}")[1] == 1.0
    qa = QaEnv(dataset=[{"question": "Capital of France?", "answer": "Paris"}])
    assert "Capital of France?" in qa.reset(0)[0]


def test_offline_dataset_error_names_the_requested_id(monkeypatch) -> None:
    """Offline, gem.make("eval:AIME24") raised a DatasetUnavailableError naming the core's other readers of the hub
    dataset (math:AMC, math:Minerva, ...) and never eval:AIME24; now the requested id comes first."""
    pytest.importorskip("datasets")
    import gem_core.envs.dataset as dataset_module

    monkeypatch.setattr(dataset_module, "_in_hf_cache", lambda path: False)
    monkeypatch.setattr(dataset_module, "_hub_unreachable", lambda: "offline for this test")
    for env_id in ("eval:AIME24", "eval:QaOpen"):
        with pytest.raises(dataset_module.DatasetUnavailableError) as caught:
            gem.make(env_id)
        assert str(caught.value).startswith(env_id)
