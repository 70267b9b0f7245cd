"""64 concurrent episodes whose env step waits 1 s (a tool call stand-in): wall time vs serial.

``run_episodes`` runs every episode on one event loop; while one waits on its env, the others go on.
With a 1 s step and T turns, 64 episodes should take about T seconds, not 64 * T.

Two kinds of slow step are measured:

- ``async``: the env overrides ``astep`` with ``await asyncio.sleep`` (an async tool client);
- ``sync``:  the env's plain ``step`` calls ``time.sleep`` and ``astep`` runs it in a worker thread,
  from a pool sized like asyncio's default executor (``min(32, cpu_count + 4)`` threads: 6 on 2 cores)
  and from GEM's :data:`gem_core.env.ENV_THREADS` (256 threads), which the default ``Env.astep`` uses.
  The gap between these two rows is why that pool is large.
- ``ray``: the same sync step in Ray actors (:class:`gem_core.vector.ray_env.RayEnvPool`, 2 actors on a
  local Ray started on loopback), the episode awaiting each actor call; skipped without Ray (``--no-ray``
  skips it too).

    python bench/concurrency.py [--episodes 64] [--turns 2] [--delay 1.0] [--serial-episodes 4] [--no-ray]

The serial time is measured on ``--serial-episodes`` episodes (concurrency 1) and scaled to
``--episodes`` (it is linear by construction); pass ``--serial-episodes 64`` to measure all of it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

import gem_core.env as gem_env
from gem_core.env import ENV_THREADS, Env, EnvThreadPool
from gem_core.rollout import run_episodes
from gem_core.testing import ScriptedPolicy, make_tokenizer


class SlowToolEnv(Env):
    """Each step "calls a tool" that takes ``delay`` seconds; the episode lasts ``turns`` steps."""

    def __init__(self, turns: int, delay: float, mode: str, pool: EnvThreadPool | None = None):
        # No pool object in the defaults: a Ray actor receives this class pickled by value.
        self.turns, self.delay, self.mode, self.pool, self.turn = turns, delay, mode, pool or gem_env.ENV_THREADS, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return f"Episode {seed}: call the tool {self.turns} times.", {}

    def _answer(self, action: str):
        self.turn += 1
        done = self.turn >= self.turns
        return f"tool result {self.turn}", float(done), done, False, {}

    def step(self, action: str):
        time.sleep(self.delay)
        return self._answer(action)

    async def astep(self, action: str):
        if self.mode == "async":
            await asyncio.sleep(self.delay)
            return self._answer(action)
        return await self.pool.run(self.step, action)  # as the default Env.astep, with a chosen pool

    def sample_random_action(self) -> str:
        return "call"


async def timed(args, mode: str, episodes: int, concurrency: int, pool: Any) -> float:
    tokenizer = make_tokenizer("chatml")
    policy = ScriptedPolicy(tokenizer, ["\\boxed{call}"])
    if mode == "ray":  # pool is a RayEnvPool
        factory = pool.factory(SlowToolEnv, turns=args.turns, delay=args.delay, mode="sync")
    else:
        factory = lambda: SlowToolEnv(args.turns, args.delay, mode, pool)  # noqa: E731
    start = time.perf_counter()
    trajs = await run_episodes(factory, policy, tokenizer, list(range(episodes)), concurrency=concurrency)
    elapsed = time.perf_counter() - start
    assert all(t.num_turns == args.turns and t.terminated for t in trajs)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per env step")
    parser.add_argument("--serial-episodes", type=int, default=4)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray row")
    args = parser.parse_args()

    n, t = args.episodes, args.turns
    default_threads = min(32, (os.cpu_count() or 1) + 4)
    ideal = t * args.delay
    print(f"{n} episodes x {t} turns, env step = {args.delay:.1f} s; ideal wall time {ideal:.1f} s")
    print(f"{'step kind':<38} {'concurrent (s)':>15} {'serial (s)':>11} {'speed-up':>9} {'per turn (s)':>13}")
    small_pool = EnvThreadPool(max_workers=default_threads, thread_name_prefix="bench-small")
    rows = [
        ("async step (asyncio.sleep)", "async", ENV_THREADS),
        (f"sync step, asyncio-sized pool ({default_threads} thr)", "sync", small_pool),
        (f"sync step, ENV_THREADS ({ENV_THREADS.max_workers} thr)", "sync", ENV_THREADS),
    ]
    ray_pool = None if args.no_ray else _ray_pool(n)
    if ray_pool is not None:
        rows.append(("ray actors (2, sync step in threads)", "ray", ray_pool))
    for label, mode, pool in rows:
        if mode == "ray":
            asyncio.run(timed(args, mode, 2, concurrency=2, pool=pool))  # the actors import gem_core once
        concurrent = asyncio.run(timed(args, mode, n, concurrency=n, pool=pool))
        serial_part = asyncio.run(timed(args, mode, args.serial_episodes, concurrency=1, pool=pool))
        serial = serial_part * n / args.serial_episodes
        print(f"{label:<38} {concurrent:>15.2f} {serial:>11.1f} {serial / concurrent:>8.1f}x {concurrent / t:>13.2f}")
    small_pool.shutdown()
    ENV_THREADS.shutdown()
    if ray_pool is not None:
        ray_pool.close()
    if args.serial_episodes != n:
        print(f"(serial times measured on {args.serial_episodes} episodes and scaled to {n})")


def _ray_pool(episodes: int) -> Any:
    """Two env actors on a local Ray kept on loopback, or None without Ray."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        print("(ray is not installed: no ray row; pip install -e '.[ray]')")
        return None
    from gem_core.vector.ray_env import RayEnvPool

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    return RayEnvPool(num_actors=2, num_cpus=0, max_envs_per_actor=episodes)


if __name__ == "__main__":
    main()
