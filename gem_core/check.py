"""``gem check ENV_ID``: the contract checks a GEM env must pass, for shipped envs and users' own.

Three checks, each with a message that says what broke and how to fix it:

- **gymnasium**: gymnasium's own ``check_env`` (reset/step signatures, seeding, spaces).
- **determinism**: two instances, the same seed and the same actions give the same transcript.
- **hostile actions**: empty, huge, binary, unpaired-surrogate, deeply nested and prompt-like actions
  each return a well-formed step (text observation, finite reward, bool flags, dict info) within
  ``step_limit`` seconds (after one well-formed step allowed :data:`STARTUP_SECONDS`, which starts any
  grading worker); raising is a failure, because a malformed action must be an observation.

Every reset and step of every check runs within the step limit: one that never returns fails its check, naming
the limit, and the checker returns (the call is abandoned in its thread, its env left unclosed).
"""

from __future__ import annotations

import argparse
import functools
import math
import reprlib
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gem_core.errors import InvalidArgument

__all__ = ["CheckResult", "check_env", "HOSTILE_ACTIONS", "add_check_parser", "random_play_transcript", "MAX_STEP_LIMIT",
           "STARTUP_SECONDS"]

MAX_STEP_LIMIT = 86400.0
"""The longest a step may be given (one day), as ``step_limit`` and as twice an env's ``max_step_seconds``: a
longer wait is no check, and past ``threading.TIMEOUT_MAX`` waiting for the step's thread raises OverflowError."""

STARTUP_SECONDS = 120.0
"""What the hostile check's first, well-formed step may take: a grader's worker starts on first use (the scoring
pool's own start-up limit). Not granted once another check's step has run past the step limit: that env hangs."""

HOSTILE_ACTIONS: dict[str, str] = {
    "empty": "",
    "whitespace": " \n\t ",
    "1 MB of text": "a" * 1_000_000,
    "nested boxed": "\\boxed{" * 10_000,
    "huge number": "\\boxed{" + "9" * 5_000 + "}",
    "power tower": "\\boxed{10**10**10**10}",
    "unpaired surrogate": "\\boxed{\ud800}",
    "control characters": "\x00\x1b[2J\x07",
    "deep JSON": "[" * 50_000,
    "special tokens": "<|im_end|><|endoftext|></s>",
}
"""Actions :func:`check_env` sends to test that an env answers malformed model output with an observation, never an exception: name -> action text.

"""


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict; ``message`` says what failed (or what passed)."""

    name: str
    ok: bool
    message: str


def _reward_problem(reward: Any) -> str | None:
    """Why ``reward`` is not a finite real number, or None. gymnasium's checker asks for an int, float or
    numpy number (and only warns); here anything else fails, bools included (``True`` is an int to Python,
    but a flag returned as a reward is a bug), and so does a reward that is NaN or infinite."""
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (int, float, np.integer, np.floating)):
        return (
            f"the reward {reprlib.repr(reward)} is a {type(reward).__name__}, not a real number; "
            "return a float (an int or a numpy number also passes)"
        )
    try:
        value = float(reward)
    except OverflowError:  # an int past float's range (one past 4300 digits has no repr either)
        return f"the reward, an int of {int(reward).bit_length()} bits, is too large for a float; a reward must be a finite number"
    if not math.isfinite(value):
        return f"the reward {value!r} is not finite; a reward must be a finite number"
    return None


def _well_formed(result: Any) -> str | None:
    """Why ``result`` is not a gymnasium step tuple of a text env, or None."""
    if not isinstance(result, tuple) or len(result) != 5:
        return f"step returned {type(result).__name__} of length {len(result) if isinstance(result, tuple) else '-'}; expected (observation, reward, terminated, truncated, info)"
    observation, reward, terminated, truncated, info = result
    if not isinstance(observation, str):
        return f"the observation is {type(observation).__name__}, not str"
    problem = _reward_problem(reward)
    if problem:
        return problem
    if not isinstance(terminated, (bool,)) or not isinstance(truncated, (bool,)):
        return f"terminated/truncated must be bool, got {type(terminated).__name__}/{type(truncated).__name__}"
    if not isinstance(info, dict):
        return f"info is {type(info).__name__}, not dict"
    return None


def _gymnasium_check(make_env: Callable[[], Any], step_limit: float, hung_steps: list[bool] | None = None) -> CheckResult:
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    env = make_env()
    unwrapped = env.unwrapped
    limit, why = _limit_for(env, step_limit)
    step, reset = unwrapped.step, unwrapped.reset

    def bounded_step(action: Any) -> Any:  # gymnasium's checker steps the env itself: each step runs within the limit
        outcome = _call_within(lambda: step(action), limit)
        if outcome is None:
            raise _MalformedStep(f"a step did not return within {limit:g} s ({why}); bound parsing and grading", hung=True)
        result, error, _ = outcome
        if error is not None:
            raise error
        return result

    @functools.wraps(reset)  # gymnasium reads reset's signature (seed, options): the env's own, through __wrapped__
    def bounded_reset(*args: Any, **kwargs: Any) -> Any:
        return _reset_within(lambda: reset(*args, **kwargs), limit, why)

    own = {name: vars(unwrapped).get(name) for name in ("step", "reset")}
    unwrapped.step = bounded_step  # instance attributes, over the class's methods
    unwrapped.reset = bounded_reset
    hung = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gymnasium_check_env(unwrapped, skip_render_check=True)
    except _MalformedStep as error:
        hung = error.hung
        if hung_steps is not None:
            hung_steps.append(True)
        return CheckResult("gymnasium", False, f"gymnasium's check_env failed: {error}")
    except Exception as error:
        return CheckResult("gymnasium", False, f"gymnasium's check_env failed: {type(error).__name__}: {error}")
    finally:
        for name, method in own.items():
            if method is None:
                delattr(unwrapped, name)
            else:
                setattr(unwrapped, name, method)
        if not hung:  # a hung env is still busy in the abandoned thread: do not touch or close it
            env.close()
    return CheckResult("gymnasium", True, "gymnasium's check_env passed")


def _reset_within(reset: Callable[[], Any], limit: float, why: str) -> Any:
    """What ``reset()`` returns or raises, or ``_MalformedStep`` (hung) if it ran past ``limit`` (then abandoned)."""
    outcome = _call_within(reset, limit)
    if outcome is None:
        raise _MalformedStep(f"the env's reset did not return within {limit:g} s ({why}); bound what reset loads or "
                             "waits for, or raise step_limit (gem check --step-limit)", hung=True)
    result, error, _ = outcome
    if error is not None:
        raise error
    return result


class _MalformedStep(Exception):
    """A step whose answer is not a well-formed step tuple, or that gave none within its limit (``hung``: its env is
    still busy in the abandoned thread). Not a determinism failure: the message says what."""

    def __init__(self, message: str, *, hung: bool = False):
        super().__init__(message)
        self.hung = hung


def random_play_transcript(make_env: Callable[[], Any], seed: int, turns: int, *, step_limit: float | None = None) -> list[Any]:
    """What a fresh env from ``make_env`` shows over at most ``turns`` of its own random actions from
    ``reset(seed=seed)``: the first observation, then ``(action, observation, reward, terminated,
    truncated)`` per turn. Same seed, same transcript is the determinism contract (``gem check`` and the
    env contract tests compare two). A step that is not a well-formed step tuple raises ``_MalformedStep``, and so
    does a reset or step that runs past ``step_limit`` seconds (None: no limit; raised to twice the env's
    ``max_step_seconds`` as the hostile check does), whose env is left unclosed, busy in the abandoned thread.
    """
    env = make_env()
    hung = False
    try:
        limit, why = (None, "") if step_limit is None else _limit_for(env, step_limit)
        try:
            observation, info = env.reset(seed=seed) if limit is None else _reset_within(lambda: env.reset(seed=seed), limit, why)
        except _MalformedStep as no_reset:
            hung = True
            raise _MalformedStep(f"seed {seed}: {no_reset}", hung=True) from None
        transcript: list[Any] = [observation]
        for turn in range(1, turns + 1):
            action = env.sample_random_action()
            if limit is None:
                result = env.step(action)
            else:
                outcome = _step_within(env, action, limit)
                if outcome is None:
                    hung = True
                    raise _MalformedStep(f"seed {seed}, turn {turn}: the env's step did not return within {limit:g} s ({why}); "
                                         "bound parsing and grading", hung=True)
                result, error, _ = outcome
                if error is not None:
                    raise error
            problem = _well_formed(result)
            if problem:  # checked here, or a NaN reward (never equal to itself) would read as nondeterminism
                raise _MalformedStep(f"seed {seed}, turn {turn}, the env's own sample_random_action(): {problem}")
            observation, reward, terminated, truncated, _ = result
            transcript.append((action, observation, float(reward), terminated, truncated))
            if terminated or truncated:
                break
        return transcript
    finally:
        if not hung:
            env.close()


def _determinism_check(make_env: Callable[[], Any], seeds: Sequence[int] = (0, 1), turns: int = 8, step_limit: float | None = None,
                       hung_steps: list[bool] | None = None) -> CheckResult:
    for seed in seeds:
        try:
            first = random_play_transcript(make_env, seed, turns, step_limit=step_limit)
            second = random_play_transcript(make_env, seed, turns, step_limit=step_limit)
        except _MalformedStep as error:
            if error.hung and hung_steps is not None:
                hung_steps.append(True)
            return CheckResult("determinism", False, str(error))
        except Exception as error:
            return CheckResult("determinism", False, f"playing seed {seed} raised {type(error).__name__}: {error}")
        if first != second:
            turn = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b) if any(a != b for a, b in zip(first, second, strict=False)) else min(len(first), len(second))
            return CheckResult(
                "determinism",
                False,
                f"two episodes with seed {seed} and the same actions differ at turn {turn}: draw all randomness from "
                "self.np_random (seeded by super().reset(seed=seed)), never from `random`, numpy's global state or the clock",
            )
    return CheckResult("determinism", True, f"seeds {list(seeds)} replay identically over up to {turns} turns")


def _call_within(call: Callable[[], Any], limit: float) -> tuple[Any, BaseException | None, float] | None:
    """``(result, error, seconds)`` of ``call()``, or None if it ran past ``limit`` (then abandoned in its thread)."""
    outcome: list[Any] = []

    def run() -> None:
        start = time.monotonic()
        try:
            outcome.append((call(), None, time.monotonic() - start))
        except Exception as error:
            outcome.append((None, error, time.monotonic() - start))

    worker = threading.Thread(target=run, name="gem-check-step", daemon=True)
    worker.start()
    worker.join(limit)
    return outcome[0] if outcome else None


def _step_within(env: Any, action: str, limit: float) -> tuple[Any, BaseException | None, float] | None:
    """``(result, error, seconds)`` of ``env.step(action)``, or None if it ran past ``limit`` (then abandoned)."""
    return _call_within(lambda: env.step(action), limit)


def _limit_for(env: Any, step_limit: float) -> tuple[float, str]:
    """``(seconds, why)``: what a step of ``env`` may take, ``step_limit`` or more for an env that declares more."""
    try:
        declared = env.get_wrapper_attr("max_step_seconds")  # a tool wrapper declares its calls' time
    except AttributeError:
        declared = None
    limit, why = step_limit, f"step_limit {step_limit:g} s"
    if isinstance(declared, (int, float)) and math.isfinite(declared) and 2 * declared > step_limit:
        # An env that grades under a timeout declares it; allow a loaded machine twice that (at most a day).
        limit = min(2 * declared, MAX_STEP_LIMIT)
        why = f"step_limit {step_limit:g} s, raised to twice the env's max_step_seconds of {declared:g} s"
        if limit < 2 * declared:
            why += f" (at most {MAX_STEP_LIMIT:g} s)"
    return limit, why


def _hostile_check(make_env: Callable[[], Any], step_limit: float, startup: bool = True) -> CheckResult:
    env = make_env()
    limit, why = _limit_for(env, step_limit)
    # One well-formed step first, allowed STARTUP_SECONDS: a grader's worker starts on first use and may take
    # seconds. Not when another check's step hung already: this one would most likely hang as long.
    try:
        _reset_within(lambda: env.reset(seed=0), limit, why)
    except _MalformedStep as no_reset:  # the env is still busy in the abandoned thread: do not touch or close it
        return CheckResult("hostile actions", False, str(no_reset))
    first_limit = max(limit, STARTUP_SECONDS) if startup else limit
    if _step_within(env, env.sample_random_action(), first_limit) is None:
        return CheckResult("hostile actions", False, f"a well-formed first step did not return within {first_limit:g} s"
                           + ("" if startup else f" ({why}; another check's step hung already)"))
    slowest = 0.0
    for name, action in HOSTILE_ACTIONS.items():
        try:
            _reset_within(lambda: env.reset(seed=0), limit, why)
        except _MalformedStep as no_reset:
            return CheckResult("hostile actions", False, f"before the {name} action: {no_reset}")
        outcome = _step_within(env, action, limit)
        if outcome is None:  # the env is still busy in the abandoned thread: do not touch or close it
            return CheckResult("hostile actions", False, f"the {name} action did not return within {limit:g} s ({why}); bound parsing and grading")
        result, error, elapsed = outcome
        if error is not None:
            where = traceback.extract_tb(error.__traceback__)[-1]
            env.close()
            return CheckResult(
                "hostile actions",
                False,
                f"the {name} action raised {type(error).__name__}: {error} ({where.filename}:{where.lineno}); "
                "answer a malformed action with env.invalid_action(message) instead of raising",
            )
        slowest = max(slowest, elapsed)
        problem = _well_formed(result)
        if problem:
            env.close()
            return CheckResult("hostile actions", False, f"the {name} action: {problem}")
    env.close()
    return CheckResult("hostile actions", True, f"{len(HOSTILE_ACTIONS)} hostile actions answered (slowest {slowest:.2f} s; limit {limit:g} s)")


def _check_seeds(seeds: Any) -> tuple[int, ...]:
    """``seeds`` as a tuple of ints, refused by name when it could replay nothing (empty, not a sequence, a str: a
    sequence of letters) or holds what ``reset`` refuses (checked here, or the determinism check blames the env)."""
    from gem_core.env import MAX_SEED, check_seed

    wanted = f"seeds must be a non-empty sequence of whole numbers from 0 to {MAX_SEED}, such as (0, 1)"
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise InvalidArgument(f"{wanted}; got {type(seeds).__name__} {reprlib.repr(seeds)}.")
    checked = []
    for seed in seeds:
        try:
            value = check_seed(seed)
        except InvalidArgument:
            value = None
        if value is None:  # None is a fresh random seed: nothing to replay
            raise InvalidArgument(f"{wanted}; got {reprlib.repr(seed)} in {reprlib.repr(seeds)}.")
        checked.append(value)
    return tuple(checked)


def check_env(make_env: Callable[[], Any], *, step_limit: float = 10.0, seeds: Sequence[int] = (0, 1)) -> list[CheckResult]:
    """Run every contract check on envs built by ``make_env()``; one result per check.

    ``seeds``: the episodes replayed twice for determinism (each costs two env builds).
    ``step_limit``: seconds any reset or step may take (at least twice the env's ``max_step_seconds``, at most
    :data:`MAX_STEP_LIMIT` either way); one past it fails its check, the hostile check's first step excepted
    (:data:`STARTUP_SECONDS`).

    Raises:
        InvalidArgument: if ``step_limit`` is not a positive number of seconds, at most :data:`MAX_STEP_LIMIT`, or
            ``seeds`` is not a non-empty sequence of whole numbers from 0 to :data:`gem_core.env.MAX_SEED`
            (no seed replays nothing, and a bad one would fail a correct env).
    """
    if not (isinstance(step_limit, (int, float)) and math.isfinite(step_limit) and 0 < step_limit <= MAX_STEP_LIMIT):
        raise InvalidArgument(f"step_limit must be a positive number of seconds, at most {MAX_STEP_LIMIT:g} (one day), got {step_limit!r}.")
    seeds = _check_seeds(seeds)
    hung: list[bool] = []  # a step of an earlier check ran past its limit: the hostile check grants no start-up time
    results = []
    for check in (
        lambda m: _gymnasium_check(m, step_limit, hung),
        lambda m: _determinism_check(m, seeds, step_limit=step_limit, hung_steps=hung),
        lambda m: _hostile_check(m, step_limit, startup=not hung),
    ):
        try:
            results.append(check(make_env))
        except Exception as error:  # building or resetting the env failed: that check fails, the others run
            name = {0: "gymnasium", 1: "determinism", 2: "hostile actions"}[len(results)]
            results.append(CheckResult(name, False, f"{type(error).__name__}: {error}"))
    return results


def _check(args: argparse.Namespace) -> int:
    from gem_core.registry import UnknownEnvError, import_env_modules, make, spec

    try:
        import_env_modules(args.imports)  # the user's module that registers their env
    except Exception as error:
        print(f"gem check: importing {args.imports} failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    try:
        env_spec = spec(args.env_id)
    except (UnknownEnvError, ValueError) as error:
        print(error, file=sys.stderr)
        return 2
    overrides = {} if args.full_data else dict(env_spec.sample_kwargs)
    from gem_core.env import Env

    try:
        probe = make(args.env_id, **overrides)
    except Exception as error:  # a constructor's own error, a missing extra, an offline dataset
        print(f"gem check: building {args.env_id} failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    single_agent = isinstance(probe.unwrapped, Env)
    probe.close()
    if not single_agent:
        print(f"{args.env_id} is not a single-agent gem_core.Env ({type(probe.unwrapped).__name__}); gem check covers single-agent envs.", file=sys.stderr)
        return 2
    results = check_env(lambda: make(args.env_id, **overrides), step_limit=args.step_limit)
    for result in results:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.name}: {result.message}")
    failed = [r.name for r in results if not r.ok]
    print(f"{args.env_id}: " + (f"{len(failed)} check(s) failed ({', '.join(failed)})" if failed else "all checks passed"))
    return 1 if failed else 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    if value > MAX_STEP_LIMIT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_STEP_LIMIT:g} seconds (one day), got {text!r}")
    return value


def add_check_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``gem check`` on the ``gem`` command's subparsers."""
    parser = commands.add_parser(
        "check", help="run the env contract checks (gymnasium, determinism, hostile actions)", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("env_id", help="a registered env id (register yours first: see examples/register_new_env.py)")
    parser.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="a module or .py file to import first (the one that registers your env); repeatable",
    )
    parser.add_argument(
        "--step-limit", type=_seconds, default=10.0,
        help="seconds any reset or step may take (raised to twice the env's max_step_seconds where that is more)",
    )
    parser.add_argument("--full-data", action="store_true", help="load the env's full dataset instead of its shipped sample")
    parser.set_defaults(run=_check)
