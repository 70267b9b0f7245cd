import subprocess
import sys

import pytest

from gem_core import Env, list_envs, make, register, spec
from gem_core.registry import UnknownEnvError


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """Ids registered by a test vanish after it, so the suite's other tests see the shipped registry."""
    from gem_core import registry

    list_envs()  # load the shipped envs first, into the copy below
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


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
    register("test:Broken-v0", "gem_core.envs.game.wordle")
    with pytest.raises(ValueError, match="package.module:Class"):
        make("test:Broken-v0")


def test_list_envs_glob_and_substring():
    assert list_envs("game:Wordle*") == ["game:Wordle-v0", "game:Wordle-v0-easy", "game:Wordle-v0-hard"]
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
