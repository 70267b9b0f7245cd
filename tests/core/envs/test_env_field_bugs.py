"""Env defects found in the field: Password clues that spell the secret, spawned clones that all dealt the same
episode, -random games that checked their levels only when a reset drew them, Retail's random tool calls in one
format only, and file-path keywords that failed with raw OSErrors."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.game.random_difficulty import RandomDifficulty
from gem_core.envs.multi_agent.password import Password
from gem_core.errors import GemError, InvalidArgument, InvalidArgumentType, MissingFile, ResetNeeded
from gem_core.tools.calls import CALL_FORMATS, parse_native_calls
from gem_core.wrappers.core import Wrapper

# -- Password: a clue that spells the secret is refused --------------------------------------------

LEAKS = {
    "hyphens": lambda w: "-".join(w),
    "dots": lambda w: ".".join(w),
    "zero-width space": lambda w: w[:2] + "\u200b" + w[2:],
    "full-width": lambda w: "".join(chr(ord(c) + 0xFEE0) for c in w),
    "capitals and apostrophe": lambda w: w.upper()[:2] + "'" + w[2:],
}


@pytest.mark.parametrize("leak", LEAKS, ids=list(LEAKS))
def test_a_password_clue_that_spells_the_secret_is_refused(leak):
    """Before the fix the clue check was a plain substring test on the lowercased text: the secret spelt with
    hyphens, dots, a zero-width space or full-width letters passed as a one-word clue, the guesser read it and
    both seats were paid 1.0 (a reward hack self-play learns)."""
    env = Password()
    env.reset(seed=3)
    clue = LEAKS[leak](env.secret)
    observations, rewards, _, _, infos = env.step({"clue_giver": f"\\boxed{{{clue}}}"})
    assert "guesser" not in observations, f"clue {clue!r} for {env.secret!r} was passed to the guesser"
    assert rewards == {"clue_giver": env.format_penalty}
    assert infos["clue_giver"]["format_error"] is True
    assert "contains the secret word" in observations["clue_giver"]
    assert env.acting_agents() == ("clue_giver",)


def test_a_password_clue_that_does_not_spell_the_secret_still_counts():
    """The normalised check must not refuse honest clues: a hyphenated clue is still one word."""
    env = Password()
    env.reset(seed=3)
    observations, rewards, _, _, _ = env.step({"clue_giver": "\\boxed{well-known}"})
    assert "guesser" in observations and rewards == {}


# -- spawn(same_state=False) without a seed deals fresh episodes -----------------------------------

SPAWN_CASES = [("game:Wordle-v0", "target"), ("game:Sudoku-v0-easy", "solution"), ("game:GuessTheNumber-v0-hard", "target")]


def _make(env_id):
    return gem_core.make(env_id, **gem_core.spec(env_id).sample_kwargs)


def _deal(env):
    return str(getattr(env.unwrapped, SPAWN_KEYS[env.unwrapped.env_id]))


SPAWN_KEYS = dict(SPAWN_CASES)


@pytest.mark.parametrize("env_id", list(SPAWN_KEYS))
def test_unseeded_spawned_clones_get_different_episodes(env_id):
    """Before the fix every clone copied the parent's np_random and reset(seed=None) kept it: five unseeded
    clones (and the parent's own next unseeded reset) all dealt the same episode."""
    parent = _make(env_id)
    parent.reset(seed=1)
    deals = [_deal(parent.spawn(same_state=False)) for _ in range(5)]
    assert len(set(deals)) > 1, f"5 unseeded clones all dealt {deals[0]!r}"
    parent.reset()
    assert _deal(parent) != deals[0]


def test_unseeded_spawned_clones_of_a_seeded_env_are_reproducible():
    """The clone's seed comes from the parent's generator, so a seeded parent still gives the same clones."""
    def clones():
        parent = _make("game:Wordle-v0")
        parent.reset(seed=4)
        return [_deal(parent.spawn(same_state=False)) for _ in range(4)]

    assert clones() == clones()


def test_unseeded_spawned_clones_of_a_wrapper_stack_get_different_episodes():
    """Wrapper.spawn had the same fault as Env.spawn: the wrapped clones shared the inner env's generator."""
    parent = Wrapper(_make("game:Wordle-v0"))
    parent.reset(seed=1)
    deals = [_deal(parent.spawn(same_state=False)) for _ in range(5)]
    assert len(set(deals)) > 1, f"5 unseeded wrapped clones all dealt {deals[0]!r}"


def test_a_seeded_spawn_and_a_branch_are_unchanged():
    """An explicit seed still fixes the clone's episode, and a same-state branch leaves the parent's RNG alone."""
    parent = _make("game:Wordle-v0")
    parent.reset(seed=1)
    before = parent.np_random.bit_generator.state
    parent.spawn(same_state=True)
    assert parent.np_random.bit_generator.state == before
    reference = _make("game:Wordle-v0")
    reference.reset(seed=9)
    assert _deal(parent.spawn(same_state=False, seed=9)) == _deal(reference)


# -- -random games check their game and levels when made ---------------------------------------------

def test_a_misspelt_level_key_is_refused_when_the_random_game_is_made():
    """Before the fix make() accepted it and a reset that happened to draw that level raised a bare TypeError
    (about half the seeds), so a training run died at a random episode."""
    with pytest.raises(InvalidArgumentType, match=r"levels\[1\].*'word_lenght'"):
        gem_core.make("game:Wordle-v0-random", levels=[{"word_length": 5}, {"word_lenght": 5}])


def test_a_bad_level_value_is_refused_when_the_random_game_is_made():
    """A value the game refuses surfaced only at the reset that drew its level."""
    with pytest.raises(GemError, match=r"levels\[0\]"):
        gem_core.make("game:GuessTheNumber-v0-random", levels=[{"min_number": 5, "max_number": 1}, {}])


@pytest.mark.parametrize(
    ("game", "error"),
    [(5, InvalidArgumentType), ("gem_core.envs.game.wordle:Nope", InvalidArgument), ("nomod_gem_test:Wordle", InvalidArgument),
     ("gem_core.envs.game.wordle", InvalidArgument), ("gem_core.envs.game.wordle:load_words", InvalidArgumentType)],
)
def test_a_bad_random_game_is_refused_by_name(game, error):
    """Before the fix: a bare AttributeError (non-str game, unknown class) or ModuleNotFoundError (unknown module)."""
    with pytest.raises(error, match="game="):
        RandomDifficulty(game=game, levels=[{}])


def test_the_shipped_random_games_still_play():
    """Building the levels up front changes neither the level drawn nor the episode."""
    env = gem_core.make("game:Wordle-v0-random")
    _, info = env.reset(seed=0)
    assert info["level"] in (0, 1, 2)
    assert isinstance(env.step(env.sample_random_action())[0], str)


# -- Retail: random tool calls in the env's call format ------------------------------------------------

@pytest.mark.parametrize("call_format", sorted(CALL_FORMATS))
def test_retail_random_tool_calls_are_written_in_the_envs_call_format(call_format):
    """Before the fix sample_random_action always wrote Hermes <tool_call> tags: with mistral, llama3_json or
    deepseek_v3 none of its tool calls was read as one (each went to the customer as a chat message)."""
    env = gem_core.make("agent:Retail-v0", call_format=call_format)
    env.reset(seed=0)
    calls = 0
    for _ in range(12):
        action = env.sample_random_action()
        if "email" in action and not parse_native_calls(call_format, action):
            continue  # the chat-message choice
        calls += 1
        parsed = parse_native_calls(call_format, action)
        assert len(parsed) == 1 and parsed[0].error is None, action
        assert parsed[0].name in ("get_order_details", "cancel_pending_order")
    assert calls > 0


def test_retail_random_action_before_reset_asks_for_reset():
    """Before the fix it raised a bare IndexError (the 1-entry fallback order list indexed with integers(10))."""
    env = gem_core.make("agent:Retail-v0")
    with pytest.raises(ResetNeeded, match="reset"):
        for _ in range(20):
            env.sample_random_action()


# -- file-path keywords are checked by name ------------------------------------------------------------

@pytest.mark.parametrize(
    ("env_id", "key", "value", "error"),
    [
        ("game:WikiGame-v0", "graph_file", "/nonexistent/graph.tsv", MissingFile),
        ("game:WikiGame-v0", "graph_file", "/tmp", MissingFile),
        ("game:WikiGame-v0", "graph_file", 5, InvalidArgumentType),
        ("multi:Password-v0", "words_file", "/nonexistent/words.tsv", MissingFile),
        ("multi:Password-v0", "words_file", 3.5, InvalidArgumentType),
        ("judge:Sample", "rubric", "/nonexistent/rubric.json", MissingFile),
        ("judge:Sample", "rubric", 7, InvalidArgumentType),
    ],
)
def test_a_bad_file_path_keyword_is_refused_by_name(env_id, key, value, error):
    """Before the fix: a raw FileNotFoundError / IsADirectoryError / TypeError naming neither the keyword nor the fix."""
    with pytest.raises(error, match=key):
        gem_core.make(env_id, **{key: value})


def test_a_malformed_password_words_file_is_refused_by_line(tmp_path):
    """A line without its tab was a bare ValueError from tuple unpacking."""
    path = tmp_path / "words.tsv"
    path.write_text("tomato\tred; salad\nno tab here\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match=r"words.tsv:2"):
        Password(words_file=str(path))
