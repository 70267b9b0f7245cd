"""Field bugs of gem_core.rows: env kwargs that reached a dataset unchecked, the placement taken from a row, a bad
placement variable blamed on the kwargs, an env repeated under its alias, half a dataset before a refusal, and a
bad ``$GEM_SEARCH_URL`` reported as an argument nobody gave."""

from __future__ import annotations

import pytest

from gem_core import placement
from gem_core.errors import InvalidArgument
from gem_core.registry import make, spec
from gem_core.rows import EnvKwargsError, MixtureError, episode_rows, make_label_env, parse_env_options, parse_label

ENV_ID = "game:GuessTheNumber-v0"
HANOI, HANOI_ALIAS = "game:TowerOfHanoi-v0", "game:TowerofHanoi-v0"


class _LazyEnv:
    """What the Ray placement returns (gem_core.vector.ray_env.RayEnv): a handle whose env is built only at its
    first reset, in an actor, so constructing it checks none of the env's kwargs."""

    def __init__(self, env_id: str, **env_kwargs):
        self.env_id, self.env_kwargs, self.closed = env_id, env_kwargs, False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def lazy_placement(monkeypatch):
    """``GEM_ENV_BACKEND=ray`` with the Ray placement replaced by :class:`_LazyEnv` (the core env has no Ray): the code
    path of make_label_env is the Ray one, and every env the placement was asked for is recorded."""
    placed: list[_LazyEnv] = []

    def make_env(env_id, env_backend=None, **env_kwargs):
        assert (env_backend or placement.env_backend_from_environment()) == "ray"
        placed.append(_LazyEnv(env_id, **env_kwargs))
        return placed[-1]

    monkeypatch.setenv("GEM_ENV_BACKEND", "ray")
    monkeypatch.setattr(placement, "make_env", make_env)
    return placed


def test_kwargs_are_checked_before_an_env_is_placed_where_it_is_built_lazily(lazy_placement):
    """Defect 1: under GEM_ENV_BACKEND=ray make_label_env relied on construction to refuse bad kwargs, but the Ray
    placement builds the env only at its first reset in the actor: {"bogus": 1} was accepted, and a dataset whose every
    episode fails in training was written (exit 0). Now the kwargs are checked here against the registry before placing."""
    with pytest.raises(EnvKwargsError, match="bogus"):
        make_label_env(parse_label({"env_id": ENV_ID, "seed": 0, "env_kwargs": {"bogus": 1}}))
    with pytest.raises(EnvKwargsError, match="bogus"):
        list(episode_rows(ENV_ID, 2, env_kwargs={"bogus": 1}, with_messages=False))
    with pytest.raises(EnvKwargsError, match="max_turns"):  # a turn limit make() would refuse
        make_label_env(parse_label({"env_id": ENV_ID, "seed": 0, "env_kwargs": {"max_turns": 0}}))
    assert lazy_placement == []  # refused before anything was placed
    env = make_label_env(parse_label({"env_id": ENV_ID, "seed": 0, "env_kwargs": {"max_number": 5, "max_turns": 3}}))
    assert (env.env_id, env.env_kwargs) == (ENV_ID, {"max_number": 5, "max_turns": 3})


@pytest.mark.parametrize("name", ["env_backend", "pool_options", "pool"])
def test_a_placement_option_in_env_kwargs_is_refused_as_a_keyword_the_env_does_not_take(name, monkeypatch):
    """Defect 3: {"env_backend": "local"} in a label's env_kwargs was taken by placement.make_env as the placement
    (GuessTheNumber takes no such keyword, yet it was accepted, written into the rows, and at training time overrode the
    job's GEM_ENV_BACKEND); under Ray, {"pool_options": ...} was swallowed by the RayEnv the same way."""
    with pytest.raises(EnvKwargsError, match=name):
        list(episode_rows(ENV_ID, 2, env_kwargs={name: "local"}, with_messages=False))
    monkeypatch.setenv("GEM_ENV_BACKEND", "no-such-placement")  # the job's setting must be read, not the row's
    with pytest.raises(EnvKwargsError, match=name):
        make_label_env(parse_label({"env_id": ENV_ID, "seed": 0, "env_kwargs": {name: "local"}}))


def test_a_placement_option_is_refused_before_the_lazy_placement_swallows_it(lazy_placement):
    """Defect 3 under Ray: RayEnv took pool_options for itself, so the row's option never reached the env nor an error."""
    with pytest.raises(EnvKwargsError, match="pool_options"):
        make_label_env(parse_label({"env_id": ENV_ID, "seed": 0, "env_kwargs": {"pool_options": {"num_cpus": 0}}}))
    assert lazy_placement == []


def test_a_bad_placement_variable_is_named_not_blamed_on_the_env_kwargs(monkeypatch):
    """Defect 4: a bad GEM_ENV_BACKEND (or GEM_RAY_ENV_*) was reported as "env_kwargs {} do not fit ... give only those
    names": make_label_env turned every ValueError of the placement into EnvKwargsError, and the dataset CLI blamed
    --env-kwargs."""
    label = parse_label({"env_id": ENV_ID, "seed": 0})
    monkeypatch.setenv("GEM_ENV_BACKEND", "Ray")
    with pytest.raises(InvalidArgument, match="GEM_ENV_BACKEND") as refused:
        make_label_env(label)
    assert not isinstance(refused.value, EnvKwargsError)
    monkeypatch.setenv("GEM_ENV_BACKEND", "ray")
    monkeypatch.setenv("GEM_RAY_ENV_ACTORS", "two")
    import gem_core.vector.ray_env as ray_env

    monkeypatch.setattr(ray_env, "_default_pool", None)  # the pool reads the variables when it is first made
    with pytest.raises(InvalidArgument, match="GEM_RAY_ENV_ACTORS") as refused:
        make_label_env(label)
    assert not isinstance(refused.value, EnvKwargsError)


def test_an_env_under_its_id_and_its_alias_is_refused_as_given_twice():
    """Defect 5: the "given more than once" checks compared the ids as typed, so an env under its id and its alias
    (game:TowerOfHanoi-v0, game:TowerofHanoi-v0) passed: the dataset repeated every episode, and a weighted mixture
    gave the env both weights."""
    assert spec(HANOI) is spec(HANOI_ALIAS)
    with pytest.raises(InvalidArgument, match="more than once"):
        next(episode_rows([HANOI, HANOI_ALIAS], 3, with_messages=False))
    with pytest.raises(MixtureError, match="twice"):
        next(episode_rows({HANOI: 1, HANOI_ALIAS: 1}, 6, with_messages=False))
    with pytest.raises(MixtureError, match="twice"):
        parse_env_options([f"{HANOI}:1", f"{HANOI_ALIAS}:2"])


def test_with_messages_every_ids_kwargs_are_checked_before_the_first_row():
    """Defect 9: with messages (TRL's and verl's default) episode_rows yielded every row of the first env id before it
    refused env_kwargs that do not fit a later one, so a caller streaming the rows to a file was left with half a dataset."""
    rows = episode_rows([ENV_ID, "game:Wordle-v0"], 3, env_kwargs={"max_number": 5})
    with pytest.raises(EnvKwargsError, match="game:Wordle-v0"):
        next(rows)
    mixed = episode_rows({ENV_ID: 1, "game:Wordle-v0": 1}, 6, env_kwargs={"max_number": 5})
    with pytest.raises(EnvKwargsError, match="game:Wordle-v0"):
        next(mixed)


def test_a_malformed_search_url_variable_is_named_as_the_variable(monkeypatch):
    """Defect 10: a malformed $GEM_SEARCH_URL was refused as "SearchTool(url='localhost:8000/retrieve')", naming an
    argument the user never gave instead of the variable the value came from."""
    monkeypatch.setenv("GEM_SEARCH_URL", "localhost:8000/retrieve")
    with pytest.raises(InvalidArgument, match=r"\(from \$GEM_SEARCH_URL\)"):
        make("qa:HotpotQA-search")
    from gem.tools.search_tool import SearchTool

    with pytest.raises(InvalidArgument, match=r"\(from \$GEM_SEARCH_URL\)"):
        SearchTool()
    with pytest.raises(InvalidArgument, match=r"SearchTool\(url='ftp://x'\)") as given:  # an argument is named as one
        SearchTool(search_url="ftp://x")
    assert "GEM_SEARCH_URL" not in str(given.value)
