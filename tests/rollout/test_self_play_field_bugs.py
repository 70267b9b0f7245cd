"""Field bugs of run_self_play, SeatEnv and Password (each test says what went wrong before its fix)."""

from __future__ import annotations

import asyncio

import pytest

import gem_core
from gem_core.envs.multi_agent.password import Password
from gem_core.envs.multi_agent.tic_tac_toe import TicTacToe
from gem_core.errors import GemError, InvalidArgumentType, MalformedFile
from gem_core.rollout.runner import EpisodeArgumentError
from gem_core.rollout.self_play import run_self_play
from gem_core.testing import ScriptedPolicy, make_tokenizer


def _first_mover_seed(agent: str) -> int:
    return next(seed for seed in range(50) if TicTacToe().reset(seed=seed)[0].get(agent))


def _play(coro, timeout: float = 20.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_a_seat_whose_game_ends_before_its_first_turn_plays_no_turn():
    """Before: when x forfeited by invalid moves before o ever moved, o was still asked to generate a move for the
    finished game ("Your opponent forfeited: you win.") and its +1 was credited to that made-up turn (num_turns 1)."""
    tok = make_tokenizer()
    calls = {"x": 0, "o": 0}

    def garbage(agent):
        def answer(ids):
            calls[agent] += 1
            return "garbage no move"
        return ScriptedPolicy(tok, answer)

    seed = _first_mover_seed("x")
    trajs = _play(run_self_play(TicTacToe(max_invalid=1), {"x": garbage("x"), "o": garbage("o")}, tok, seed=seed))
    o = trajs["o"]
    assert calls["o"] == 0
    assert o.num_turns == 0 and o.rewards == [] and o.actions == []
    assert o.terminated or o.truncated
    assert o.metrics["final_reward"] == 1.0
    assert o.metrics["terminated"] == o.terminated and o.metrics["num_turns"] == 0
    assert trajs["x"].num_turns == 1


def test_the_first_movers_policy_error_is_raised_not_another_seats():
    """Before: when the seat that moves first had a policy that raised, run_self_play raised the waiting seat's
    UsageError("Another seat of this game failed...") when that seat came first in seat order."""
    tok = make_tokenizer()

    class Broken:
        async def generate(self, prompt_ids, sampling):
            raise RuntimeError("model server died")

    seed = _first_mover_seed("o")  # x, first in seat order, is still waiting for its first turn
    with pytest.raises(RuntimeError, match="model server died"):
        _play(run_self_play(TicTacToe(), {"x": ScriptedPolicy(tok, ["\\boxed{5}"]), "o": Broken()}, tok, seed=seed))


def test_run_self_play_refuses_a_single_agent_env():
    """Before: a single-agent env gave a raw AttributeError ('no attribute agents')."""
    tok = make_tokenizer()
    with pytest.raises(InvalidArgumentType, match="MultiAgentEnv"):
        _play(run_self_play(gem_core.make("game:2048-v0"), ScriptedPolicy(tok, ["\\boxed{5}"]), tok, seed=0))


def test_run_self_play_refuses_an_unknown_keyword_up_front():
    """Before: a typo (max_turn=2) gave run_episode's raw TypeError after both seats had started."""
    tok = make_tokenizer()
    with pytest.raises(EpisodeArgumentError, match="run_self_play got an unexpected keyword 'max_turn'"):
        _play(run_self_play(TicTacToe(), ScriptedPolicy(tok, ["\\boxed{5}"]), tok, seed=0, max_turn=2))


@pytest.mark.parametrize(
    "content",
    [b"# secret<TAB>clues\n\n", b"caf\xe9\thint\n", b"\tclue\n"],
    ids=["comments-only", "not-utf8", "empty-secret"],
)
def test_password_refuses_a_bad_words_file(tmp_path, content):
    """Before: a comments-only file was accepted and every reset raised numpy's ValueError('high <= 0'); a file that is
    not UTF-8 raised a raw UnicodeDecodeError; a '\\tclue' line loaded an empty secret word."""
    path = tmp_path / f"words-{len(content)}.tsv"
    path.write_bytes(content)
    with pytest.raises(MalformedFile, match="words"):
        Password(words_file=str(path)).reset(seed=0)


@pytest.mark.parametrize("form", ["period", "quoted", "fullwidth"])
def test_password_reads_a_guess_as_the_clue_check_does(form):
    """Before: a guess was compared as exact text (strip+lower) while clues were normalised, so \\boxed{Violin.},
    \\boxed{"violin"} or a full-width violin was scored wrong."""
    env = Password()
    env.reset(seed=0)
    secret = env.secret
    guess = {"period": secret.capitalize() + ".", "quoted": f'"{secret}"',
             "fullwidth": "".join(chr(ord(c) + 0xFEE0) for c in secret)}[form]
    env.step({"clue_giver": "\\boxed{zzzq}"})
    _, rewards, terminations, _, _ = env.step({"guesser": f"\\boxed{{{guess}}}"})
    assert rewards["guesser"] == 1.0 and terminations["guesser"]


def test_password_errors_are_gem_errors():
    assert issubclass(MalformedFile, GemError)
