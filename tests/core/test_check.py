"""``gem check`` and upstream GEM id aliases: the contract checks pass on shipped envs and fail, naming
the cause, on an env that breaks determinism or raises on a malformed action."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from ci_guard import skip_unless_ci
from sample_builds import one_id_per_sample_build, sample_build

from gem_core import Env, list_envs, make, spec
from gem_core.check import check_env
from gem_core.cli import main
from gem_core.registry import aliases


class Coin(Env):
    """A well-behaved one-turn env: guess the seeded coin."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.side = str(self.np_random.choice(["heads", "tails"]))
        return "Heads or tails? Answer in \\boxed{}.", {}

    def step(self, action):
        if not isinstance(action, str) or "\\boxed{" not in action:
            return self.invalid_action("Answer in \\boxed{heads} or \\boxed{tails}.")
        guess = action.split("\\boxed{", 1)[1].split("}", 1)[0]
        return f"It was {self.side}.", float(guess == self.side), True, False, {}

    def sample_random_action(self):
        return "\\boxed{" + str(self.np_random.choice(["heads", "tails"])) + "}"


class UnseededCoin(Coin):
    """Breaks determinism: draws from the process-wide `random`."""

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed)
        self.side = random.choice(["heads", "tails"]) + str(random.random())
        return observation + f" ({self.side})", info


class FragileCoin(Coin):
    """Raises on a malformed action instead of answering it."""

    def step(self, action):
        if "\\boxed{" not in action:
            raise ValueError("no box")
        return super().step(action)


def results(env_class) -> dict[str, tuple[bool, str]]:
    return {r.name: (r.ok, r.message) for r in check_env(env_class)}


def test_a_correct_env_passes_every_check():
    assert {name: ok for name, (ok, _) in results(Coin).items()} == {"gymnasium": True, "determinism": True, "hostile actions": True}


def test_nondeterminism_is_reported_with_the_fix():
    ok, message = results(UnseededCoin)["determinism"]
    assert not ok and "seed 0" in message and "self.np_random" in message


def test_raising_on_a_malformed_action_is_reported_with_the_fix():
    ok, message = results(FragileCoin)["hostile actions"]
    assert not ok and "raised ValueError: no box" in message and "invalid_action" in message


# One id per category and loader: the whole list runs in the slow test below.
SHIPPED = ["game:GuessTheNumber-v0", "game:Wordle-v0-easy", "game:Sokoban-v0-easy", "game:2048-v0-random", "math:Sample", "qa:Sample", "code:Sample", "rg:letter_counting"]


def shipped_overrides(env_id: str) -> dict:
    """The shipped sample data, and for code envs the sandbox mode this machine has (bwrap may be missing)."""
    overrides = dict(spec(env_id).sample_kwargs)
    if env_id.startswith("code:") or env_id.endswith("-python"):
        from gem_core.tools import sandbox

        if not sandbox.available_modes():
            skip_unless_ci("no sandbox mode works here")
        overrides["sandbox_mode"] = sandbox.available_modes()[0]
    return overrides


@pytest.mark.parametrize("env_id", SHIPPED)
def test_shipped_envs_pass(env_id):
    pytest.importorskip("datasets")
    overrides = shipped_overrides(env_id)
    failed = [r for r in check_env(lambda: make(env_id, **overrides)) if not r.ok]
    assert failed == []


def _every_shipped_id_but_most_rg() -> list[str]:
    """Every single-agent sample build not in SHIPPED, with one ReasoningGym id in ten and each game at its
    default level only: building the 106 rg datasets took most of this test's 7 minutes, the 39 other game
    levels (-easy, -hard, -random: the same class with other sizes) a third of the rest, and
    tests/core/test_env_contract.py already holds every rg id and every game level to the same checks
    (gymnasium's checker, same seed same episode, hostile actions). The math, qa, logic and code ids whose
    sample is another id's env (math:GSM8K's is math:Sample's, see tests/sample_builds.py) are checked once."""
    ids = [i for i in list_envs() if not i.startswith("multi:")]  # multi-agent: another contract
    rg = [i for i in ids if i.startswith("rg:")]
    levels = [i for i in ids if i.startswith("game:") and not re.fullmatch(r"game:[^-]+-v\d+", i)]
    return one_id_per_sample_build([i for i in ids if not i.startswith("rg:") and i not in levels], already_checked=SHIPPED) + rg[::10]


def test_the_slow_check_keeps_every_sample_build_but_the_rg_datasets_and_game_levels():
    levels = [i for i in list_envs() if i.startswith("game:") and not re.fullmatch(r"game:[^-]+-v\d+", i)]
    ids = [i for i in list_envs() if not i.startswith(("multi:", "rg:")) and i not in levels]
    checked = {sample_build(i) for i in SHIPPED + _every_shipped_id_but_most_rg()}
    assert {sample_build(i) for i in ids} <= checked
    assert {spec(i).entry_point for i in list_envs() if not i.startswith("multi:")} <= {spec(i).entry_point for i in SHIPPED + _every_shipped_id_but_most_rg()}


@pytest.mark.slow
@pytest.mark.parametrize("env_id", _every_shipped_id_but_most_rg())
def test_every_shipped_env_passes(env_id):
    """One determinism seed here (building some envs costs seconds); the fast test above uses two."""
    pytest.importorskip("datasets")
    overrides = shipped_overrides(env_id)
    failed = [r for r in check_env(lambda: make(env_id, **overrides), seeds=(0,)) if not r.ok]
    assert failed == []


def test_gem_check_command_on_a_user_module(tmp_path, capsys):
    module = tmp_path / "my_envs.py"
    module.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from gem_core import register
        register("user:Fragile-v0", "test_check_envs:FragileCoin")
        register("user:Coin-v0", "test_check_envs:Coin")
    """))
    (tmp_path / "test_check_envs.py").write_text(open(__file__).read())
    assert main(["check", "user:Coin-v0", "--import", str(module)]) == 0
    assert main(["check", "user:Fragile-v0"]) == 1
    out = capsys.readouterr().out
    assert "user:Coin-v0: all checks passed" in out
    assert "FAIL  hostile actions: the empty action raised ValueError: no box" in out
    assert main(["check", "user:Nope-v0"]) == 2


@pytest.mark.parametrize(
    ("alias", "target"),
    [("game:TowerofHanoi-v0-easy", "game:TowerOfHanoi-v0-easy"), ("game:Game2048-v0-easy", "game:2048-v0-easy"), ("eval:MATH500", "math:MATH-500")],
)
def test_upstream_ids_are_aliases(alias, target):
    assert aliases()[alias] == target
    assert spec(alias) is spec(target)
    assert alias not in list_envs()


def test_upstream_game_alias_plays_the_same_episode():
    assert make("game:TowerofHanoi-v0-easy").reset(seed=3) == make("game:TowerOfHanoi-v0-easy").reset(seed=3)


def test_gem_list_aliases():
    out = subprocess.run([sys.executable, "-m", "gem_core.cli", "list", "--aliases"], capture_output=True, text=True, check=True).stdout
    assert "game:TowerofHanoi-v0-easy -> game:TowerOfHanoi-v0-easy" in out


# --- issue 28.5: rewards that are not real numbers, NaN rewards, and the step limit's message -----------


class RewardCoin(Coin):
    """Coin whose every reward is ``REWARD`` (a class attribute, so the check can build it with no arguments)."""

    REWARD: object = 1.0

    def step(self, action):
        observation, _, terminated, truncated, info = super().step(action)
        return observation, self.REWARD, terminated, truncated, info


def reward_coin(reward: object) -> type:
    return type("RewardCoin", (RewardCoin,), {"REWARD": reward})


@pytest.mark.parametrize("reward, type_name", [("1", "str"), (True, "bool"), (None, "NoneType"), ([1.0], "list")])
def test_a_reward_that_is_not_a_real_number_fails_naming_its_type(reward, type_name):
    found = results(reward_coin(reward))
    for check in ("determinism", "hostile actions"):
        ok, message = found[check]
        assert not ok and f"reward {reward!r} is a {type_name}" in message, (check, message)
        assert "np_random" not in message


@pytest.mark.parametrize("reward", [np.float32(0.5), np.int64(1), 1, 0.5, np.float64(1.0)])
def test_numpy_and_python_numbers_are_rewards(reward):
    assert all(ok for ok, _ in results(reward_coin(reward)).values())


@pytest.mark.parametrize("reward", [10**400, 10**5000], ids=["400 digits", "5000 digits"])
def test_an_int_past_floats_range_is_reported_not_raised(reward):
    """10**5000 has no repr (Python refuses ints past 4300 digits): the report named it with reprlib and raised."""
    ok, message = results(reward_coin(reward))["hostile actions"]
    assert not ok and "too large for a float" in message and "bits" in message


@pytest.mark.parametrize("reward", [float("nan"), float("inf"), np.float32("-inf")])
def test_a_nan_or_infinite_reward_is_reported_as_such_not_as_nondeterminism(reward):
    found = results(reward_coin(reward))
    for check in ("determinism", "hostile actions"):
        ok, message = found[check]
        assert not ok and "is not finite" in message and repr(float(reward)) in message, (check, message)
        assert "np_random" not in message


RELEASE_HUNG_STEPS = threading.Event()


class HangingCoin(Coin):
    """Hangs on the empty action (until the test releases it, at most 30 s); declares 0.25 s per step."""

    max_step_seconds = 0.25

    def step(self, action):
        if action == "":
            RELEASE_HUNG_STEPS.wait(30)
        return super().step(action)


def test_the_step_limit_message_shows_the_limit_given_and_the_one_applied():
    try:
        found = {r.name: (r.ok, r.message) for r in check_env(HangingCoin, step_limit=0.1)}
    finally:
        RELEASE_HUNG_STEPS.set()
    ok, message = found["hostile actions"]
    assert not ok and "the empty action did not return within 0.5 s" in message
    assert "step_limit 0.1 s" in message and "max_step_seconds" in message


def test_gem_check_reports_an_env_that_fails_to_build_without_a_traceback(tmp_path):
    module = tmp_path / "broken_envs.py"
    module.write_text(textwrap.dedent("""
        from gem_core import Env, register

        class Broken(Env):
            def __init__(self):
                raise ValueError("size must be positive")

        register("user:Broken-v0", Broken)
    """))
    done = subprocess.run([sys.executable, "-m", "gem_core.cli", "check", "user:Broken-v0", "--import", str(module)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "user:Broken-v0" in done.stderr and "ValueError: size must be positive" in done.stderr


@pytest.mark.parametrize("limit", ["0", "-1", "nan", "inf", "soon"])
def test_gem_check_refuses_a_step_limit_that_is_not_a_positive_number_of_seconds(limit):
    done = subprocess.run([sys.executable, "-m", "gem_core.cli", "check", "game:Wordle-v0", "--step-limit", limit], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--step-limit" in done.stderr and "positive number of seconds" in done.stderr


# --- issue 28.6: gem list --aliases PATTERN ----------------------------------------------------------------


def gem_list(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gem_core.cli", "list", *args], capture_output=True, text=True, timeout=120)


def test_gem_list_aliases_keeps_only_the_aliases_matching_the_pattern():
    done = gem_list("--aliases", "game:*")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and "game:TowerofHanoi-v0-easy -> game:TowerOfHanoi-v0-easy" in lines
    assert lines and all(line.startswith("game:") for line in lines)
    assert len(lines) == sum(1 for alias in aliases() if alias.startswith("game:"))


def test_gem_list_aliases_pattern_matches_the_target_too_and_plain_substrings():
    assert "eval:MATH500 -> math:MATH-500" in gem_list("--aliases", "math:*").stdout.splitlines()
    assert gem_list("--aliases", "hanoi").stdout.splitlines() == [
        f"{alias} -> {target}" for alias, target in aliases().items() if "hanoi" in f"{alias} {target}".lower()
    ]


def test_gem_list_aliases_says_when_nothing_matches():
    done = gem_list("--aliases", "nothing:*")
    assert done.returncode == 1 and done.stdout == "" and "No alias matches 'nothing:*'" in done.stderr


def test_an_import_that_names_a_folder_says_to_name_its_file(tmp_path, capsys, monkeypatch):
    """`gem check ID --import examples` imported the folder as an empty namespace package, then said the id
    was not registered; the folder is named, with the .py files it holds."""
    from gem_core.cli import main

    (tmp_path / "my_gem_check_envs").mkdir()
    (tmp_path / "my_gem_check_envs" / "my_env.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "user:Coin-v0", "--import", "my_gem_check_envs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "my_gem_check_envs is a folder: --import takes the .py file that registers the env (my_gem_check_envs/my_env.py) or a dotted module name" in err
    (tmp_path / "my_gem_check_envs" / "__init__.py").write_text("from gem_core import register\nregister('user:Pkg-v0', 'gem_core.envs.game.guess_the_number:GuessTheNumber')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    main(["check", "user:Pkg-v0", "--import", "my_gem_check_envs"])  # a package folder is a module name: imported, its env registered
    assert "No env registered" not in capsys.readouterr().err and "user:Pkg-v0" in list_envs()


def test_gem_check_refuses_a_step_limit_past_a_day_instead_of_failing_a_healthy_env():
    """``--step-limit 1e10`` was accepted, then thread.join(1e10) raised OverflowError (past threading.TIMEOUT_MAX)
    and the healthy env failed the hostile-actions check."""
    done = subprocess.run([sys.executable, "-m", "gem_core.cli", "check", "game:GuessTheNumber-v0", "--step-limit", "1e10"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "--step-limit" in done.stderr and "at most 86400" in done.stderr
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="at most 86400"):
        check_env(Coin, step_limit=1e10)


class SlowlyDeclaredCoin(Coin):
    """Declares more time per step than a thread may be waited for."""

    max_step_seconds = 1e10


def test_a_step_limit_raised_to_twice_a_huge_declared_step_time_is_capped_not_an_overflow():
    found = {r.name: (r.ok, r.message) for r in check_env(SlowlyDeclaredCoin)}
    assert found["hostile actions"][0], found["hostile actions"][1]
