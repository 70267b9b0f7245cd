import asyncio

import pytest

from gem_core import make, spec
from gem_core.wrappers import EpisodeStatistics, ObservationFormat, TurnLimit


def guess_env(**kwargs):
    return make("game:GuessTheNumber-v0-easy", **kwargs)


def test_turn_limit_truncates_on_the_last_turn():
    env = TurnLimit(guess_env(max_turns=50), max_turns=3)
    env.reset(seed=0)
    results = [env.step("\\boxed{0}") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["turn_limit_reached"] is True
    env.reset(seed=0)
    assert env.step("\\boxed{0}")[3] is False  # the count restarts with the episode


def test_turn_limit_rejects_nonpositive_limits():
    with pytest.raises(ValueError, match="max_turns"):
        TurnLimit(guess_env(), max_turns=0)


def test_episode_statistics_reports_on_the_final_step():
    env = EpisodeStatistics(guess_env())
    env.reset(seed=1)
    target = env.unwrapped.target
    _, _, _, _, info = env.step("no box")
    assert "episode" not in info
    _, reward, terminated, _, info = env.step(f"\\boxed{{{target}}}")
    assert terminated and reward == 1.0
    stats = info["episode"]
    assert (stats["r"], stats["l"], stats["success"], stats["format_errors"]) == (pytest.approx(0.9), 2, True, 1)
    assert 0 <= stats["t"] < 60 and list(env.return_queue) == [pytest.approx(0.9)] and env.episode_count == 1


def test_episode_statistics_are_gymnasiums_on_the_async_path_too():
    import asyncio

    async def run():
        env = EpisodeStatistics(guess_env())
        await env.areset(seed=1)
        await env.astep("no box")
        result = await env.astep(f"\\boxed{{{env.unwrapped.target}}}")
        await env.areset(seed=2)
        return env, result

    env, (_, _, terminated, _, info) = asyncio.run(run())
    assert terminated and (info["episode"]["l"], info["episode"]["format_errors"]) == (2, 1)
    assert env.episode_count == 1 and env.episode_lengths == 0


def test_success_has_one_definition():
    from gem_core.env import episode_success

    assert episode_success([{"success": False}], 1.0, True) is False  # the env's verdict wins
    assert episode_success([{}], 1.0, True) is True
    assert episode_success([{}], 1.0, False) is False  # cut short is not a success
    assert episode_success([], 0.0, True) is False


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("raw", "Turns left: 5. 0 is outside the range 1-10."),
        ("history", "{first}\n\nTurns left: 5. 0 is outside the range 1-10."),
        ("history_with_actions", "Observation: {first}\n\nAction: \\boxed{{0}}\n\nObservation: Turns left: 5. 0 is outside the range 1-10."),
    ],
)
def test_observation_modes(mode, expected):
    first, _ = guess_env().reset(seed=2)
    env = ObservationFormat(guess_env(), mode=mode)
    env.reset(seed=2)
    obs, *_ = env.step("\\boxed{0}")
    assert obs == expected.format(first=first)


def test_chat_mode_builds_messages():
    env = ObservationFormat(guess_env(), mode="chat", system_prompt="Be brief.")
    first, info = env.reset(seed=2)
    assert info["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": first}]
    obs, *_, info = env.step("\\boxed{0}")
    assert [m["role"] for m in info["messages"]] == ["system", "user", "assistant", "user"]
    assert info["messages"][-2:] == [{"role": "assistant", "content": "\\boxed{0}"}, {"role": "user", "content": obs}]


def test_unknown_observation_mode_lists_the_choices():
    with pytest.raises(ValueError, match="raw, history"):
        ObservationFormat(guess_env(), mode="concat")


def test_wrappers_keep_async_and_random_actions():
    env = EpisodeStatistics(TurnLimit(guess_env(), max_turns=2))

    async def play():
        await env.areset(seed=3)
        await env.astep(env.sample_random_action())
        return await env.astep("\\boxed{0}")

    *_, truncated, info = asyncio.run(play())
    assert truncated and info["episode"]["l"] == 2


def test_a_wrapped_game_is_still_non_blocking_but_a_tool_wrapper_blocks():
    """The vector env steps non-blocking envs inline; a wrapper must not hide that, nor hide a tool's waits."""
    from gem_core.tools.python import PythonTool
    from gem_core.wrappers import ToolUse

    game = make("game:GuessTheNumber-v0")
    assert game.blocking is False
    assert TurnLimit(ObservationFormat(game, "history"), max_turns=3).blocking is False
    assert ToolUse(make("game:GuessTheNumber-v0"), [PythonTool()]).blocking is True
    assert ObservationFormat(make("math:Sample", **spec("math:Sample").sample_kwargs), "raw").blocking is True
