import subprocess
import sys

import pytest

from gem_core import Env, list_envs, make, register, spec
from gem_core.registry import UnknownEnvError



class Dummy(Env):
    def __init__(self, size: int = 1):
        self.size = size


def test_unknown_id_names_closest_ids():
    with pytest.raises(UnknownEnvError, match="game:Wordle-v0"):
        make("game:Wordel-v0")


def test_taken_id_raises():
    register("test:Dummy-v0", Dummy)
    with pytest.raises(ValueError, match="already registered"):
        register("test:Dummy-v0", Dummy)


@pytest.mark.parametrize("bad_id", ["Dummy-v0", "test:", ":Dummy", "Test:Dummy", "test:Du mmy"])
def test_malformed_id_raises(bad_id):
    with pytest.raises(ValueError, match="category:Name"):
        register(bad_id, Dummy)


def test_make_merges_defaults_and_overrides():
    register("test:Sized-v0", Dummy, size=3)
    assert make("test:Sized-v0").size == 3
    assert make("test:Sized-v0", size=5).size == 5


def test_string_entry_point_is_imported_on_first_use():
    env = make("game:GuessTheNumber-v0-hard")
    assert type(env).__name__ == "GuessTheNumber" and env.max_number == 100


def test_bad_entry_point_says_the_expected_form():
    with pytest.raises(ValueError, match="package.module:Class"):  # at register, not at the first make
        register("test:Broken-v0", "gem_core.envs.game.wordle")


def test_list_envs_glob_and_substring():
    assert list_envs("game:Wordle*") == ["game:Wordle-v0", "game:Wordle-v0-easy", "game:Wordle-v0-hard", "game:Wordle-v0-random"]
    assert "game:GuessTheNumber-v0-easy" in list_envs("guessthe")
    assert spec("game:Wordle-v0").category == "game"


def test_import_gem_core_stays_light():
    code = "import sys, gem_core; gem_core.list_envs(); print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_registering_a_shipped_id_before_the_registry_is_read_fails_at_once_and_breaks_nothing():
    """Registering first used to load the builtins later, inside list_envs(), which then raised on the clash."""
    import subprocess
    import sys

    code = (
        "import gem_core\n"
        "try:\n"
        "    gem_core.register('math:GSM8K', 'gem_core.envs.game.wordle:Wordle')\n"
        "except ValueError as err:\n"
        "    assert 'already registered' in str(err), err\n"
        "else:\n"
        "    raise SystemExit('a shipped id was taken over')\n"
        "gem_core.register('mine:Custom-v0', 'gem_core.envs.game.wordle:Wordle')\n"
        "ids = gem_core.list_envs()\n"
        "assert 'math:GSM8K' in ids and 'mine:Custom-v0' in ids and 'game:Wordle-v0' in ids\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


class Steps(Env):
    """Never ends by itself: only a turn limit stops it."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "go", {}

    def step(self, action):
        return "again", 0.0, False, False, {}


def test_registered_max_turns_is_the_specs_and_make_applies_it_as_gymnasium_does():
    register("test:Steps-v0", Steps, max_turns=3)
    assert spec("test:Steps-v0").max_turns == 3 and spec("test:Steps-v0").kwargs == {}
    env = make("test:Steps-v0")  # Steps takes no max_turns: a TurnLimit counts for it
    env.reset(seed=0)
    results = [env.step("x") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True] and results[-1][4]["turn_limit_reached"]
    env = make("test:Steps-v0", max_turns=5)  # the override replaces the registered limit
    env.reset(seed=0)
    assert [env.step("x")[3] for _ in range(5)] == [False] * 4 + [True]
    register("test:Dummy-v1", Dummy)
    assert type(make("test:Dummy-v1")) is Dummy  # no limit registered: no wrapper


def test_a_game_counts_its_own_turns_with_the_limit_make_gives_it():
    assert spec("game:GuessTheNumber-v0-easy").max_turns == 6 and "max_turns" not in spec("game:GuessTheNumber-v0-easy").kwargs
    game = make("game:GuessTheNumber-v0-easy", max_turns=2)
    assert type(game).__name__ == "GuessTheNumber" and game.max_turns == 2  # not wrapped: the game says how many are left
    observation, _ = game.reset(seed=0)
    assert "at most 2 turns" in observation
    assert [game.step("\\boxed{0}")[3] for _ in range(2)] == [False, True]


def test_a_random_level_game_plays_every_level_with_the_override():
    env = make("game:Mastermind-v0-random", max_turns=2)
    assert type(env).__name__ == "RandomDifficulty"
    for seed in range(4):
        env.reset(seed=seed)
        assert env.max_turns == 2


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_a_bad_turn_limit_names_the_key(bad):
    with pytest.raises(ValueError, match="max_turns"):
        make("game:GuessTheNumber-v0", max_turns=bad)
    with pytest.raises(ValueError, match="max_turns"):
        register("test:Bad-v0", Steps, max_turns=bad)


def test_make_reads_a_factorys_signature_once_not_twice_per_env(monkeypatch):
    """``make`` checks the keywords against the factory's signature and asks it whether it counts its own turns; it
    read the signature twice per env, two thirds of a ``make`` (issue 46: ~50 of 76 us, paid per episode by
    ``run_episodes``' factories). A factory's signature is read once; a wrong keyword is still refused by name."""
    import inspect

    from gem_core.errors import InvalidArgumentType

    class Counted(Env):
        def __init__(self, size: int = 1, max_turns: int | None = None):
            self.size, self.max_turns = size, max_turns

    register("test:Counted-v0", Counted, max_turns=3)
    reads = []
    real_signature = inspect.signature
    monkeypatch.setattr(inspect, "signature", lambda *a, **k: reads.append(a[0]) or real_signature(*a, **k))
    envs = [make("test:Counted-v0", size=i) for i in range(5)]
    assert [env.size for env in envs] == list(range(5)) and {env.max_turns for env in envs} == {3}
    assert reads.count(Counted) <= 1, f"{reads.count(Counted)} signature reads for 5 envs"
    with pytest.raises(InvalidArgumentType, match="it takes size, max_turns"):
        make("test:Counted-v0", colour="red")


def test_an_unhashable_factory_is_still_checked_and_made():
    """A callable object that defines ``__eq__`` without ``__hash__`` cannot key the signature cache: it is read each time."""
    from gem_core.errors import InvalidArgumentType

    class Factory:
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Factory)

        def __call__(self, size: int = 1) -> Dummy:
            return Dummy(size)

    register("test:Unhashable-v0", Factory())
    assert make("test:Unhashable-v0", size=4).size == 4
    with pytest.raises(InvalidArgumentType, match="it takes size"):
        make("test:Unhashable-v0", colour="red")


@pytest.mark.parametrize("env_id", ["math:Sample-python", "qa:Sample-search", "math:Geometry3K", "judge:Sample"])
def test_a_misspelt_keyword_is_refused_by_name_where_the_factory_passes_its_kwargs_on(env_id):
    """These ids' factories take ``**kwargs`` and build the env from them; a misspelt keyword was a bare
    TypeError from inside the factory, not the InvalidArgumentType ``math:Sample`` gives."""
    from gem_core.errors import InvalidArgumentType

    with pytest.raises(InvalidArgumentType, match=r"got an unexpected keyword argument 'grade_timout'; it takes .*data_files"):
        make(env_id, **spec(env_id).sample_kwargs, grade_timout=5)


def test_a_factory_declares_where_its_kwargs_go_and_make_lists_both_signatures():
    from gem_core.errors import InvalidArgumentType
    from gem_core.registry import forwards_kwargs

    @forwards_kwargs(Dummy)
    def wrapped(*, colour: str = "red", **kwargs):
        return Dummy(**kwargs)

    register("test:Forwards-v0", wrapped)
    assert make("test:Forwards-v0", size=3).size == 3
    with pytest.raises(InvalidArgumentType, match="unexpected keyword argument 'sise'; it takes colour, size"):
        make("test:Forwards-v0", sise=3)

    @forwards_kwargs(Dummy)
    class Tinted(Dummy):
        def __init__(self, *, tint: int = 0, **kwargs):
            super().__init__(**kwargs)
            self.tint = tint

    class Shaded(Tinted):  # the declaration is Tinted's own: a subclass's **kwargs may hold Tinted's keywords
        def __init__(self, *, shade: int = 0, **kwargs):
            super().__init__(**kwargs)

    register("test:Shaded-v0", Shaded)
    assert make("test:Shaded-v0", tint=2, size=3).tint == 2


def test_max_turns_on_a_multi_agent_env_is_refused_naming_the_fix():
    """TurnLimit is single-agent: around a multi-agent game its results stopped being per-agent dicts."""
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"multi:TicTacToe-v0.*max_turns=2.*multi-agent.*leave max_turns out"):
        make("multi:TicTacToe-v0", max_turns=2)
    register("test:MultiLimited-v0", "gem_core.envs.multi_agent.tic_tac_toe:TicTacToe", max_turns=4)
    with pytest.raises(InvalidArgument, match="max_turns"):
        make("test:MultiLimited-v0")
    assert type(make("multi:TicTacToe-v0")).__name__ == "TicTacToe"


@pytest.mark.parametrize(("keywords", "message"), [
    ({"extras": "math"}, r"extras.*extras=\('math',\)"),
    ({"extras": None}, r"extras.*tuple of pip extra names.*None"),
    ({"extras": ("math", 3)}, r"extras.*tuple of pip extra names"),
    ({"sample_kwargs": [1, 2]}, r"sample_kwargs.*dict.*list"),
])
def test_register_refuses_extras_and_sample_kwargs_of_the_wrong_type_naming_them(keywords, message):
    from gem_core.errors import GemError

    with pytest.raises(GemError, match=message):
        register("test:BadTypes-v0", "gem_core.envs.game.wordle:Wordle", **keywords)
    assert "test:BadTypes-v0" not in list_envs()
    assert register("test:GoodTypes-v0", "gem_core.envs.game.wordle:Wordle", extras=["math"], sample_kwargs=None).extras == ("math",)
