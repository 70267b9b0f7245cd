"""Multi-agent games: the contract (determinism, hostile actions, state), scripted players, and one
token trajectory per seat through the runner."""

from __future__ import annotations

import asyncio
import functools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem_core
from gem_core.envs.multi_agent.password import Password, load_words
from gem_core.envs.multi_agent.tic_tac_toe import LINES, TicTacToe
from gem_core.errors import InvalidArgument
from gem_core.multi_agent import MultiAgentEnv
from gem_core.rollout.self_play import run_self_play
from gem_core.testing import ScriptedPolicy

MULTI_IDS = gem_core.list_envs("multi:*")


def test_the_multi_agent_games_are_registered_in_their_own_category():
    assert MULTI_IDS == ["multi:Password-v0", "multi:TicTacToe-v0"]
    for env_id in MULTI_IDS:
        assert isinstance(gem_core.make(env_id), MultiAgentEnv)


def play_random(env: MultiAgentEnv, seed: int, max_steps: int = 50):
    observations, _ = env.reset(seed=seed)
    trace = [observations]
    for _ in range(max_steps):
        actions = {agent: env.sample_random_action(agent) for agent in env.acting_agents()}
        result = env.step(actions)
        trace.append((actions, *result))
        if any(result[2].values()) or any(result[3].values()):
            break
    return trace


@pytest.mark.parametrize("env_id", MULTI_IDS)
def test_same_seed_same_game(env_id):
    assert play_random(gem_core.make(env_id), 7) == play_random(gem_core.make(env_id), 7)


@pytest.mark.parametrize("env_id", MULTI_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.one_of(st.text(max_size=50), st.just("\\boxed{5}"), st.just("\\boxed{}"), st.just("x" * 10_000)), min_size=1, max_size=15))
def test_hostile_actions_are_observations_never_exceptions(env_id, actions):
    env = gem_core.make(env_id)
    env.reset(seed=1)
    for action in actions:
        if not env.acting_agents():
            break
        observations, rewards, *_ = env.step({agent: action for agent in env.acting_agents()})
        assert all(isinstance(text, str) for text in observations.values())
        assert all(isinstance(value, float) for value in rewards.values())


@pytest.mark.parametrize("env_id", MULTI_IDS)
def test_a_restored_game_continues_exactly_as_the_original(env_id):
    env = gem_core.make(env_id)
    env.reset(seed=3)
    env.step({agent: env.sample_random_action(agent) for agent in env.acting_agents()})
    fresh = gem_core.make(env_id)
    fresh.set_state(env.get_state())
    branch = env.spawn()
    for _ in range(4):
        if not env.acting_agents():
            break
        actions = {agent: branch.sample_random_action(agent) for agent in env.acting_agents()}
        assert fresh.step(actions) == env.step(actions)


def test_a_move_out_of_turn_is_a_programming_error_that_says_whose_turn_it_is():
    env = TicTacToe()
    env.reset(seed=0)
    other = "o" if env.acting_agents() == ("x",) else "x"
    with pytest.raises(ValueError, match="It is the move of .*; step\\(\\) needs exactly"):
        env.step({other: "\\boxed{1}"})


@pytest.mark.parametrize("env_id", MULTI_IDS)
@pytest.mark.parametrize("actions", ["\\boxed{1}", ["\\boxed{1}"], None])
def test_a_bare_action_instead_of_a_dict_names_the_type_and_the_call_to_make(env_id, actions):
    env = gem_core.make(env_id)
    env.reset(seed=0)
    (agent,) = env.unwrapped.acting_agents()
    with pytest.raises(TypeError) as caught:
        env.step(actions)
    message = str(caught.value)
    assert f"got a {type(actions).__name__}" in message and f"step({{{agent!r}: " in message
    assert "'\\\\', 'b', 'o'" not in message and "['\\\\'" not in message  # not the string's characters


def test_an_action_dict_with_keys_of_mixed_types_is_still_a_clear_value_error():
    env = TicTacToe()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="step\\(\\) needs exactly"):
        env.step({1: "\\boxed{1}", "nobody": "\\boxed{2}"})


# -- tic-tac-toe: perfect play ---------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _minimax(board: str, me: str) -> tuple[int, int]:
    """(score for ``me`` to move, best cell): +1 win, 0 draw, -1 loss."""
    other = "O" if me == "X" else "X"
    for a, b, c in LINES:
        if board[a] != " " and board[a] == board[b] == board[c]:
            return (1 if board[a] == me else -1), -1
    free = [i for i, cell in enumerate(board) if cell == " "]
    if not free:
        return 0, -1
    best = (-2, -1)
    for cell in free:
        score = -_minimax(board[:cell] + me + board[cell + 1 :], other)[0]
        if score > best[0]:
            best = (score, cell)
    return best


def perfect_move(observation: str, me: str) -> str:
    rows = re.findall(r"^([^\n|]+) \| ([^\n|]+) \| ([^\n|]+)$", observation, re.M)[-3:]
    board = "".join(cell if cell in "XO" else " " for row in rows for cell in row)
    return f"\\boxed{{{_minimax(board, me.upper())[1] + 1}}}"


def play_tic_tac_toe(seed: int, players: dict) -> dict[str, float]:
    env = TicTacToe()
    observations, _ = env.reset(seed=seed)
    totals = {agent: 0.0 for agent in env.agents}
    while env.acting_agents():
        (agent,) = env.acting_agents()
        move = players[agent](observations[agent], agent, env)
        observations, rewards, *_ = env.step({agent: move})
        for name, value in rewards.items():
            totals[name] += value
    return totals


def test_perfect_play_never_loses_and_beats_a_random_player_on_seeds_0_to_19():
    perfect = lambda obs, me, env: perfect_move(obs, me)  # noqa: E731
    rand = lambda obs, me, env: env.sample_random_action(me)  # noqa: E731
    wins = 0
    for seed in range(20):
        both = play_tic_tac_toe(seed, {"x": perfect, "o": perfect})
        assert both == {"x": 0.0, "o": 0.0}  # perfect against perfect is a draw, zero-sum
        result = play_tic_tac_toe(seed, {"x": perfect, "o": rand})
        assert result["x"] >= 0.0 and result["x"] + result["o"] == 0.0
        wins += result["x"] == 1.0
    assert wins >= 15


def test_three_invalid_moves_in_a_row_forfeit():
    env = TicTacToe()
    env.reset(seed=0)
    (agent,) = env.acting_agents()
    for _ in range(2):
        _, rewards, terminations, _, _ = env.step({agent: "pass"})
        assert rewards == {agent: env.format_penalty} and not terminations
    _, rewards, terminations, _, infos = env.step({agent: "\\boxed{10}"})
    assert rewards[agent] == -1.0 and sum(rewards.values()) == 0.0 and all(terminations.values()) and infos[agent]["forfeit"]


@pytest.mark.parametrize(
    ("game", "kwargs", "key"),
    [(TicTacToe, dict(max_invalid="3"), "max_invalid"), (TicTacToe, dict(max_invalid=True), "max_invalid"),
     (TicTacToe, dict(max_invalid=2.5), "max_invalid"), (Password, dict(max_rounds="3"), "max_rounds"),
     (Password, dict(max_invalid=0.5), "max_invalid")],
)
def test_a_setting_of_the_wrong_type_is_refused_naming_it(game, kwargs, key):
    """A text used to fail with a bare TypeError at the range check, a bool or a float to be played."""
    with pytest.raises(InvalidArgument, match=key):
        game(**kwargs)


# str.isdigit() takes superscripts and circled digits that int() refuses, int() takes other scripts' digits
# and refuses a run past 4300 digits: each is a malformed move, never an exception nor a cell.
@pytest.mark.parametrize("number", ["\u00b2", "\u2460", "\u0663", "1" * 5000, "1_0", "+5"])
def test_a_cell_that_is_not_plain_ascii_digits_is_a_malformed_move(number):
    env = TicTacToe()
    env.reset(seed=0)
    (agent,) = env.acting_agents()
    observations, rewards, _, _, infos = env.step({agent: f"\\boxed{{{number}}}"})
    assert rewards == {agent: env.format_penalty} and infos[agent]["format_error"]
    assert "expected one cell number 1-9" in observations[agent] and env.board == [" "] * 9


# -- password: scripted partners with shared conventions -----------------------------------------------


def test_scripted_partners_win_password_on_seeds_0_to_19_and_random_ones_rarely_do():
    words = load_words()
    by_clue = {clue: word for word, clues in words.items() for clue in clues}
    for seed in range(20):
        env = Password()
        observations, _ = env.reset(seed=seed)
        totals = {agent: 0.0 for agent in env.agents}
        while env.acting_agents():
            (agent,) = env.acting_agents()
            if agent == "clue_giver":
                secret = re.search(r"secret word is '([^']+)'", observations[agent]).group(1)
                move = f"\\boxed{{{words[secret][0]}}}"
            else:
                clue = re.search(r"Clues so far: ([^.]+)\.", observations[agent]).group(1).split(", ")[-1]
                move = f"\\boxed{{{by_clue[clue]}}}"
            observations, rewards, *_ = env.step({agent: move})
            for name, value in rewards.items():
                totals[name] += value
        assert totals == {"clue_giver": 1.0, "guesser": 1.0}
    random_wins = sum(play_random(Password(), seed)[-1][2]["guesser"] > 0 for seed in range(40))  # (actions, obs, rewards, ...)
    assert random_wins < 20


def test_a_clue_that_gives_the_word_away_is_refused():
    env = Password()
    observations, _ = env.reset(seed=0)
    observations, rewards, *_ = env.step({"clue_giver": f"\\boxed{{{env.secret}s}}"})
    assert rewards == {"clue_giver": env.format_penalty} and "contains the secret word" in observations["clue_giver"]
    assert env.acting_agents() == ("clue_giver",)


# -- one trajectory per seat ------------------------------------------------------------------------


def test_self_play_gives_each_seat_its_own_token_exact_trajectory(tiny_tokenizer):
    env = TicTacToe()
    seat_policy = ScriptedPolicy(tiny_tokenizer, lambda ids: perfect_move(tiny_tokenizer.decode(ids), "x" if "play X" in tiny_tokenizer.decode(ids) else "o"))
    trajectories = asyncio.run(run_self_play(env, seat_policy, tiny_tokenizer, seed=4, env_id="multi:TicTacToe-v0"))
    assert set(trajectories) == {"x", "o"}
    reference = play_tic_tac_toe(4, {a: (lambda obs, me, e: perfect_move(obs, me)) for a in ("x", "o")})
    for agent, trajectory in trajectories.items():
        assert trajectory.env_id == f"multi:TicTacToe-v0#{agent}"
        assert trajectory.episode_return == reference[agent]
        assert trajectory.terminated
        for (start, end) in trajectory.turn_spans:
            assert all(trajectory.loss_mask[start:end])
            sampled = trajectory.response_ids[start:end]
            assert trajectory.logprobs[start:end] == [ScriptedPolicy.logprob_of(t) for t in sampled]
        assert sum(trajectory.loss_mask) == sum(end - start for start, end in trajectory.turn_spans)
    # Together the seats made every move of the game: 9 cells at most, alternating.
    assert abs(trajectories["x"].num_turns - trajectories["o"].num_turns) <= 1


def test_a_seat_that_hits_its_turn_limit_ends_the_game_for_everyone(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{banana}"])  # the guesser never finds the word
    trajectories = asyncio.run(run_self_play(Password(max_rounds=10), policy, tiny_tokenizer, seed=0, max_turns=2))
    assert all(t.truncated for t in trajectories.values())
    assert max(t.num_turns for t in trajectories.values()) == 2


def test_a_failing_policy_abandons_the_game_and_raises(tiny_tokenizer):
    class Broken:
        async def generate(self, prompt_ids, sampling):
            raise RuntimeError("model server died")

    good = ScriptedPolicy(tiny_tokenizer, ["\\boxed{5}"])
    with pytest.raises(RuntimeError, match="model server died"):
        asyncio.run(run_self_play(TicTacToe(), {"x": Broken(), "o": good}, tiny_tokenizer, seed=0))


def test_a_missing_seat_policy_is_named():
    with pytest.raises(ValueError, match="No policy for seat 'o'"):
        asyncio.run(run_self_play(TicTacToe(), {"x": object()}, None, seed=0))
