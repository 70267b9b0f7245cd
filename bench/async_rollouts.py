"""Synchronous vs asynchronous rollouts on a long-tailed multi-turn workload (issue 41).

The workload, all in one process on asyncio (no model, so it measures scheduling, not a GPU):

- a scripted generation server serves at most ``--slots`` (64) sequences at once and takes
  ``--token-time`` seconds per token of a sequence (decoding is memory-bound: one sequence more in the
  batch costs no extra time); every turn samples ``--tokens-per-turn`` tokens;
- episodes whose number of turns is geometric with mean ``--mean-turns`` (3), capped at ``--max-turns``
  (16), drawn from the episode's seed; the env answers at once;
- ``--batch`` (64) episodes per training step, and a training step takes ``--train-time`` seconds
  (the generator is free meanwhile, as on a separate rollout GPU).

Rows:

- ``sync``: today's path, :func:`gem_core.rollout.run_episodes` on 64 seeds, then the training step;
- ``async k=N``: :class:`gem_core.rollout.AsyncEpisodeEngine` with ``max_staleness=N`` (N = 0, 1, 2):
  ``next_batch``, the training step, ``update_policy`` (which aborts the generations in flight; those
  turns are sampled again by the new weights).

Figures: episodes handed to the trainer per second of wall time, the generator's idle share (the share
of wall time with no sequence on the server), its slot use (busy sequence-slots over ``slots x wall``),
generations aborted by updates, episodes dropped as too stale, and the mean turns of the episodes the
trainer got (dropping stale episodes drops the long ones first: compare with the workload's mean).

    python bench/async_rollouts.py [--steps 16] [--train-time 0.3] [--token-time 0.001] [--tokens-per-turn 32]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import time
from dataclasses import dataclass

from gem_core.env import Env
from gem_core.rollout import AsyncEpisodeEngine, AsyncRolloutConfig, ChatTemplate, Generation, SamplingParams, run_episodes
from gem_core.testing import make_tokenizer


def episode_turns(seed: int, mean: float, cap: int) -> int:
    """Turns of the episode of ``seed``: geometric on 1, 2, ... with mean ``mean``, capped at ``cap``."""
    u = random.Random(seed).random()
    return min(cap, 1 + int(math.log(1.0 - u) / math.log(1.0 - 1.0 / mean)))


class LongTailEnv(Env):
    """Ends after :func:`episode_turns` turns of its seed; each step answers at once."""

    def __init__(self, mean: float, cap: int):
        self.mean, self.cap, self.turns, self.turn = mean, cap, 1, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turns, self.turn = episode_turns(seed, self.mean, self.cap), 0
        return f"Episode {seed}: answer {self.turns} times.", {}

    def step(self, action: str):
        self.turn += 1
        done = self.turn >= self.turns
        return f"turn {self.turn} done", float(done), done, False, {}

    async def astep(self, action: str):
        return self.step(action)

    def sample_random_action(self) -> str:
        return "a"


class ScriptedServer:
    """A generation server without a model: ``slots`` sequences at once, ``token_time`` seconds per token.

    It keeps the books of its own use: seconds with no sequence running, and sequence-slot seconds.
    """

    def __init__(self, slots: int, token_time: float):
        self.slots, self.token_time = slots, token_time
        self._free = asyncio.Semaphore(slots)
        self.active = 0
        self.idle = 0.0
        self.slot_seconds = 0.0
        self._since = time.perf_counter()

    def _mark(self, change: int) -> None:
        now = time.perf_counter()
        elapsed, self._since = now - self._since, now
        if self.active == 0:
            self.idle += elapsed
        self.slot_seconds += self.active * elapsed
        self.active += change

    def restart_clock(self) -> None:
        self._mark(0)
        self.idle = self.slot_seconds = 0.0

    async def sample(self, num_tokens: int) -> None:
        """Decode ``num_tokens`` tokens of one sequence (an abort releases its slot at once)."""
        async with self._free:
            self._mark(+1)
            try:
                await asyncio.sleep(num_tokens * self.token_time)
            finally:
                self._mark(-1)


class ServerPolicy:
    """A :class:`~gem_core.rollout.policy.Policy` served by :class:`ScriptedServer`: each turn is
    ``tokens_per_turn`` ids (a filler id, then the end-of-turn ids)."""

    def __init__(self, server: ScriptedServer, tokenizer, tokens_per_turn: int):
        self.server = server
        self.eot = ChatTemplate.for_tokenizer(tokenizer).end_of_turn_ids
        self.filler = tokenizer.encode(" a", add_special_tokens=False)[-1]
        self.tokens_per_turn = max(tokens_per_turn, len(self.eot) + 1)

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        n = min(self.tokens_per_turn, sampling.max_new_tokens)
        await self.server.sample(n)
        ids = ([self.filler] * (self.tokens_per_turn - len(self.eot)) + self.eot)[:n]
        return Generation(token_ids=ids, logprobs=[-1.0] * len(ids), finish_reason="stop" if n == self.tokens_per_turn else "length")


@dataclass
class Row:
    label: str
    episodes: int
    wall: float
    idle: float
    slot_use: float
    interrupted: int = 0
    dropped: int = 0
    mean_turns: float = 0.0


def make_env_factory(args):
    return lambda: LongTailEnv(args.mean_turns, args.max_turns)


async def run_sync(args, tokenizer) -> Row:
    server = ScriptedServer(args.slots, args.token_time)
    policy = ServerPolicy(server, tokenizer, args.tokens_per_turn)
    factory, turns = make_env_factory(args), []
    server.restart_clock()
    start = time.perf_counter()
    for step in range(args.steps):
        seeds = list(range(step * args.batch, (step + 1) * args.batch))
        batch = await run_episodes(factory, policy, tokenizer, seeds, concurrency=args.batch, sampling=SamplingParams(max_new_tokens=256))
        turns += [t.num_turns for t in batch]
        await asyncio.sleep(args.train_time)  # the training step; the generator has nothing to do
    wall = time.perf_counter() - start
    server._mark(0)
    return Row("sync (run_episodes, then train)", len(turns), wall, server.idle / wall, server.slot_seconds / (args.slots * wall),
               mean_turns=sum(turns) / len(turns))


async def run_async(args, tokenizer, staleness: int) -> Row:
    server = ScriptedServer(args.slots, args.token_time)
    policy = ServerPolicy(server, tokenizer, args.tokens_per_turn)
    config = AsyncRolloutConfig(batch_size=args.batch, max_staleness=staleness, max_in_flight=args.max_in_flight)
    turns = []
    server.restart_clock()
    start = time.perf_counter()
    async with AsyncEpisodeEngine(make_env_factory(args), policy, tokenizer, range(10**9), config,
                                  sampling=SamplingParams(max_new_tokens=256)) as engine:
        for _ in range(args.steps):
            batch = await engine.next_batch()
            turns += [t.num_turns for t in batch]
            await asyncio.sleep(args.train_time)  # the training step, off the generator
            await engine.update_policy()
        wall = time.perf_counter() - start
        server._mark(0)
        metrics = engine.metrics()
    dropped = metrics["gem/async/dropped_stale"]
    return Row(f"async k={staleness} (AsyncEpisodeEngine)", len(turns), wall, server.idle / wall, server.slot_seconds / (args.slots * wall),
               interrupted=int(metrics["gem/async/generations_interrupted"]), dropped=int(dropped), mean_turns=sum(turns) / len(turns))


def workload_mean_turns(args, n: int = 100_000) -> float:
    return sum(episode_turns(s, args.mean_turns, args.max_turns) for s in range(n)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16, help="training steps per row (more amortize the first batch)")
    parser.add_argument("--batch", type=int, default=64, help="episodes per training step")
    parser.add_argument("--slots", type=int, default=64, help="sequences the generation server runs at once")
    parser.add_argument("--token-time", type=float, default=0.001, help="seconds per token of a sequence")
    parser.add_argument("--tokens-per-turn", type=int, default=32)
    parser.add_argument("--train-time", type=float, default=0.3, help="seconds per training step")
    parser.add_argument("--mean-turns", type=float, default=3.0)
    parser.add_argument("--max-turns", type=int, default=16)
    parser.add_argument("--max-in-flight", type=int, default=128, help="the async engine's in-flight cap")
    parser.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2], help="max_staleness values of the async rows")
    args = parser.parse_args()

    tokenizer = make_tokenizer("chatml")
    turn_time = args.tokens_per_turn * args.token_time
    print(
        f"workload: {args.batch} episodes/step, {args.steps} steps/row; turns ~ geometric(mean {args.mean_turns:g}) capped at "
        f"{args.max_turns} (mean {workload_mean_turns(args):.2f}); server: {args.slots} sequences at once, "
        f"{args.token_time * 1000:g} ms/token, {args.tokens_per_turn} tokens/turn ({turn_time * 1000:.0f} ms/turn); "
        f"training step {args.train_time:g} s; async in-flight cap {args.max_in_flight}, updates abort in-flight turns"
    )
    rows = [asyncio.run(run_sync(args, tokenizer))]
    rows += [asyncio.run(run_async(args, tokenizer, k)) for k in args.staleness]
    base = rows[0].episodes / rows[0].wall
    print(f"{'path':<34} {'episodes':>8} {'wall (s)':>8} {'episodes/s':>10} {'vs sync':>7} {'gen idle':>8} {'slot use':>8} "
          f"{'aborted':>7} {'dropped':>7} {'turns/ep':>8}")
    for r in rows:
        rate = r.episodes / r.wall
        print(f"{r.label:<34} {r.episodes:>8} {r.wall:>8.2f} {rate:>10.1f} {rate / base:>6.2f}x {r.idle:>8.1%} {r.slot_use:>8.1%} "
              f"{r.interrupted:>7} {r.dropped:>7} {r.mean_turns:>8.2f}")


if __name__ == "__main__":
    main()
