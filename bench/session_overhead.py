"""Per-turn cost of GEM's episode bookkeeping at scale, against a bare ``env.step`` loop.

512 episodes (``--episodes``) are in flight at once, played by a scripted policy (no model: each move is
the env's own ``sample_random_action``, its token ids encoded once per distinct text, as a sampler would
hand them over). Three ways, on the same envs, seeds and moves:

- bare: ``env.step(text)`` round-robin over the episodes (reset when one ends): the env's own cost;
- session: one ``EpisodeSession`` per episode, ``await session.step(ids, logprobs=...)`` round-robin on one
  event loop: the env step plus the token bookkeeping (the action's text decoded for the env, the
  observation's chat-template delta encoded, masks, log-probs, the turn's record);
- drive mode: ``run_episodes`` with a ``BatchingPolicy`` that returns the scripted ids, so every turn also
  goes through the batcher's rounds (all 512 episodes' turns gathered per round, as with a model).

    python bench/session_overhead.py [--episodes 512] [--env game:GuessTheNumber-v0-hard] [--seconds 3]
                                     [--tokenizer deepseek|chatml] [--system-words N]

Prints the per-turn time of each, the overhead over the bare step, the target from issue 30 (session per
turn <= 1.2 x bare per step + 100 us) and the one from issue 46 (session per turn <= 3 x bare per step).
``--clock cpu`` times with this process's CPU time instead of the wall clock: on a shared, oversubscribed
machine the wall clock also counts the time other processes held the CPU, and both loops are CPU-bound.

Steady state is what a training run sees: before anything is timed, each way runs ``--warmup`` seconds untimed
(the chat template's caches of observation deltas and action texts fill: GuessTheNumber has ~1,150 distinct
observations, each a tokenizer call the first time). ``--against REV`` also times the session code of a git
revision (``gem_core/rollout/session.py`` and ``trajectory.py`` as they were there) in the same process, its
rounds alternated with the bare loop's and this checkout's, so a change is judged on the same machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gem_core
from gem_core.rollout import ChatTemplate, EpisodeSession, SamplingParams
from gem_core.rollout.policy import BatchingPolicy
from gem_core.rollout.runner import run_episodes

#: What the loops are timed with (``--clock``): the wall clock, or this process's CPU time.
clock = time.perf_counter


class ActionIds(dict):
    """Each move's token ids (plus end of turn) and their log-probs, made once per distinct text: what a sampler hands
    over is the sampler's work, not the session's (the session copies both, so handing the same lists is safe). A dict
    that fills itself: a known move is one subscript, no Python call, so the harness adds little to the session's time."""

    def __init__(self, tokenizer, template: ChatTemplate):
        super().__init__()
        self.tokenizer, self.eot = tokenizer, list(template.end_of_turn_ids)

    def __missing__(self, text: str) -> tuple[list[int], list[float]]:
        ids = self.tokenizer.encode(text, add_special_tokens=False) + self.eot
        sample = self[text] = (ids, [-1.0] * len(ids))
        return sample


def bare(env_id: str, n: int, seconds: float, turns: float = math.inf, ready: Callable[[], object] = lambda: None) -> tuple[float, int]:
    """A bare ``env.step`` loop over ``n`` envs for ``seconds`` (or ``turns`` steps, whichever ends first); ``ready``
    is called once the envs are made and reset, before the first step."""
    envs = [gem_core.make(env_id) for _ in range(n)]
    seeds = list(range(n))
    for env, seed in zip(envs, seeds, strict=True):
        env.reset(seed=seed)
    ready()
    steps, next_seed = 0, n
    start = clock()
    while clock() - start < seconds and steps < turns:
        for env in envs:
            _, _, terminated, truncated, _ = env.step(env.sample_random_action())
            steps += 1
            if terminated or truncated:
                env.reset(seed=next_seed)
                next_seed += 1
    return (clock() - start) / steps, steps


async def sessions(
    env_id: str, n: int, seconds: float, tokenizer, template: ChatTemplate, session_class=EpisodeSession, turns: float = math.inf,
    ready: Callable[[], object] = lambda: None,
) -> tuple[float, int]:
    """One session per episode, stepped round-robin for ``seconds`` (or ``turns`` turns, whichever ends first); ``ready``
    is called once the sessions are made and started, before the first turn."""
    action_ids = ActionIds(tokenizer, template)
    live = [session_class(gem_core.make(env_id), tokenizer, chat_template=template) for _ in range(n)]
    for seed, session in enumerate(live):
        await session.start(seed=seed)
    ready()
    steps, next_seed = 0, n
    start = clock()
    while clock() - start < seconds and steps < turns:
        for session in live:
            ids, logprobs = action_ids[session.env.sample_random_action()]
            await session.step(ids, logprobs=logprobs, finish_reason="stop")
            steps += 1
            if session.done:
                session.trajectory()  # what an adapter takes at the end of every episode
                await session.start(seed=next_seed)
                next_seed += 1
    return (clock() - start) / steps, steps


async def drive(env_id: str, n: int, tokenizer, template: ChatTemplate) -> tuple[float, int]:
    """run_episodes over n seeds at once; the scripted backend finds each episode's env by its session."""
    action_ids = ActionIds(tokenizer, template)
    policy = _SessionAwarePolicy(action_ids)
    start = clock()
    trajectories = await run_episodes(lambda: policy.track(gem_core.make(env_id)), policy, tokenizer, list(range(n)),
                                      concurrency=n, chat_template=template, sampling=SamplingParams(max_new_tokens=64))
    elapsed = clock() - start
    turns = sum(t.num_turns for t in trajectories)
    return elapsed / turns, turns


class _SessionAwarePolicy(BatchingPolicy):
    """Answers each request with the random move of the env that asked: the factory runs in the episode's
    own task (``run_episodes``), so the task names the env."""

    def __init__(self, action_ids: ActionIds):
        # A round per event-loop tick (run_episodes does not report episode ends to the batcher).
        super().__init__(None, sample_in_thread=False, max_batch_size=None)
        self.action_ids = action_ids
        self.env_of_task: dict = {}
        self._queue: list = []

    borrows_prompt_ids = True  # reads no prompt at all

    def track(self, env):
        self.env_of_task[asyncio.current_task()] = env
        return env

    async def generate(self, prompt_ids, sampling, *, images=None):
        self._queue.append(self.env_of_task[asyncio.current_task()])  # same order as the batcher's requests
        return await super().generate(prompt_ids, sampling)

    def sample_batch(self, prompts, sampling, max_new_tokens):
        envs, self._queue = self._queue[: len(prompts)], self._queue[len(prompts):]
        return [self.action_ids[env.sample_random_action()] for env in envs]


def session_class_at(rev: str) -> type:
    """``EpisodeSession`` as git revision ``rev`` had it (with that revision's ``TokenTrajectory``), loaded beside this
    checkout's under other module names; the rest of gem_core is this checkout's. Compiled from ``git show``'s text
    (named ``REV:path`` in tracebacks): nothing is written to disk."""
    root = Path(__file__).resolve().parent.parent
    modules = {}
    for name in ("trajectory", "session"):
        path = f"gem_core/rollout/{name}.py"
        source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, check=True, capture_output=True, text=True).stdout
        module = types.ModuleType(f"gem_core.rollout._{name}_at_{rev}")
        sys.modules[module.__name__] = module  # dataclasses look their module up while the class is built
        exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
        modules[name] = module
    modules["session"].TokenTrajectory = modules["trajectory"].TokenTrajectory
    return modules["session"].EpisodeSession


def load(name: str):
    from token_bookkeeping import load_tokenizer

    return load_tokenizer(name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=512)
    parser.add_argument("--env", default="game:GuessTheNumber-v0-hard")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of bare and session")
    parser.add_argument("--tokenizer", default="deepseek", choices=["deepseek", "chatml"])
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"], help="cpu: this process's CPU time")
    parser.add_argument("--warmup", type=float, default=1.0, help="untimed seconds of each way first (caches warm)")
    parser.add_argument("--against", metavar="REV", help="also time the session code of this git revision, alternated")
    parser.add_argument("--only-drive", action="store_true",
                        help="time drive mode alone (one run: under valgrind, compare two checkouts' counts at the same arguments)")
    parser.add_argument("--system-words", type=int, default=0, metavar="N",
                        help="a system prompt of N words: every context that much longer (the policy gets the whole context each turn)")
    args = parser.parse_args(argv)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    tokenizer, name = load(args.tokenizer)
    template = ChatTemplate.for_tokenizer(tokenizer, system_prompt="word " * args.system_words or None)
    print(f"{args.env}, {args.episodes} episodes in flight, tokenizer {name}, {args.clock} clock"
          + (f", contexts from {len(template.initial_ids(''))} ids (--system-words)" if args.system_words else ""))
    if args.only_drive:
        drive_time, turns = asyncio.run(drive(args.env, args.episodes, tokenizer, template))
        print(f"drive mode (batcher):   {drive_time * 1e6:8.1f} us/turn   ({turns} turns of {args.episodes} episodes)")
        return
    ways = {"bare": lambda seconds: bare(args.env, args.episodes, seconds)[0],
            "session": lambda seconds: asyncio.run(sessions(args.env, args.episodes, seconds, tokenizer, template))[0]}
    if args.against:
        before = session_class_at(args.against)
        ways[f"at {args.against}"] = lambda seconds: asyncio.run(sessions(args.env, args.episodes, seconds, tokenizer, template, before))[0]
    if args.warmup > 0:
        for way in ways.values():
            way(args.warmup)
    times: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for i in range(args.rounds):
        for name in names[i % len(names):] + names[: i % len(names)]:  # each way takes each place in turn
            times[name].append(ways[name](args.seconds))
    bare_times, session_times = times["bare"], times["session"]
    drive_time, turns = asyncio.run(drive(args.env, args.episodes, tokenizer, template))
    b, s = statistics.median(bare_times), statistics.median(session_times)
    target = 1.2 * b + 100e-6
    print(f"bare env.step:          {b * 1e6:8.1f} us/step   (rounds: {' '.join(f'{t * 1e6:.1f}' for t in bare_times)})")
    print(f"EpisodeSession.step:    {s * 1e6:8.1f} us/turn   (rounds: {' '.join(f'{t * 1e6:.1f}' for t in session_times)}); "
          f"overhead {(s - b) * 1e6:.1f} us, {s / b:.2f}x")
    print(f"drive mode (batcher):   {drive_time * 1e6:8.1f} us/turn   ({turns} turns of {args.episodes} episodes; env construction, resets and "
          f"trajectories included); overhead {(drive_time - b) * 1e6:.1f} us")
    print(f"target (1.2 x bare + 100 us): {target * 1e6:.1f} us/turn -> session {'meets' if s <= target else 'MISSES'} it, "
          f"drive mode {'meets' if drive_time <= target else 'misses'} it")
    print(f"target (3 x bare, issue 46): {3 * b * 1e6:.1f} us/turn -> session {'meets' if s <= 3 * b else 'MISSES'} it ({s / b:.2f}x)")
    # Each round's session time over the bare time of the same round: load that comes and goes moves both.
    per_round = sorted(x / y for x, y in zip(session_times, bare_times, strict=True))
    noisy = per_round[-1] > 1.2 * per_round[0]
    print(f"session / bare per round: median {statistics.median(per_round):.2f}x, range {per_round[0]:.2f}-{per_round[-1]:.2f}x"
          + (" (a wide range: the machine's load moved; compare medians of runs with many --rounds)" if noisy else ""))
    if args.against:
        o = statistics.median(times[f"at {args.against}"])
        rounds = " ".join(f"{t * 1e6:.1f}" for t in times[f"at {args.against}"])
        per_round = " ".join(f"{x / y:.2f}x" for x, y in zip(times[f"at {args.against}"], bare_times, strict=True))
        print(f"session at {args.against}:  {o * 1e6:8.1f} us/turn   (rounds: {rounds}); {o / b:.2f}x bare (per round: {per_round})")
        print(f"this checkout / {args.against}: {s / o:.3f} (per round: "
              + " ".join(f"{x / y:.3f}" for x, y in zip(session_times, times[f"at {args.against}"], strict=True)) + ")")
        # On a loaded machine the load moves between rounds: the median of per-round ratios is the steadier figure.
        def median_ratio(xs: list[float], ys: list[float]) -> float:
            return statistics.median(x / y for x, y in zip(xs, ys, strict=True))

        print(f"medians of per-round ratios: this checkout / {args.against} {median_ratio(session_times, times[f'at {args.against}']):.3f}; "
              f"this checkout / bare {median_ratio(session_times, bare_times):.2f}x; {args.against} / bare "
              f"{median_ratio(times[f'at {args.against}'], bare_times):.2f}x")


if __name__ == "__main__":
    main()
