"""Step latency of an env behind ``gem serve`` vs the same env in process: p50/p95 and their ratios.

Starts ``gem serve ENV_ID`` on a loopback port, then plays the same seeded episodes three ways, side by
side in one run: in process, through :class:`gem_core.serve.remote.RemoteEnv` (HTTP, one kept-alive
connection) and over the server's WebSocket (one connection per session). Only ``step`` calls are
timed; a malformed move is mixed in, and an episode that ends is reset (untimed).

    python bench/remote_latency.py [--env game:GuessTheNumber-v0] [--steps 400]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import time

from gem_core import make
from gem_core.serve.remote import RemoteEnv


def actions(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"\\boxed{{{rng.randint(1, 20)}}}" if i % 7 else "not a move" for i in range(n)]


def time_steps(reset, step, moves: list[str]) -> list[float]:
    """Seconds per step; the episode is reset (untimed) whenever it ends."""
    timings, episode = [], 0
    reset(episode)
    for move in moves:
        start = time.perf_counter()
        result = step(move)
        timings.append(time.perf_counter() - start)
        if result[2] or result[3]:
            episode += 1
            reset(episode)
    return timings


def websocket_steps(url: str, moves: list[str]) -> list[float]:
    from websockets.sync.client import connect

    with connect(url.replace("http://", "ws://") + "/ws") as ws:

        def call(message: dict) -> tuple:
            ws.send(json.dumps(message))
            answer = json.loads(ws.recv())
            return tuple(answer.get(k) for k in ("observation", "reward", "terminated", "truncated", "info"))

        return time_steps(lambda seed: call({"op": "reset", "seed": seed}), lambda a: call({"op": "step", "action": a}), moves)


def percentiles(timings: list[float]) -> tuple[float, float]:
    cut = statistics.quantiles(timings, n=100)
    return cut[49], cut[94]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="game:GuessTheNumber-v0")
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()

    server = subprocess.Popen([sys.executable, "-m", "gem_core.cli", "serve", args.env, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"at (http://\S+)", server.stdout.readline()).group(1)
        moves = actions(args.steps)
        local = make(args.env)
        remote = RemoteEnv(url, args.env, timeout=30)
        rows = {
            "local": time_steps(lambda s: local.reset(seed=s), local.step, moves),
            "remote HTTP": time_steps(lambda s: remote.reset(seed=s), remote.step, moves),
            "remote WebSocket": websocket_steps(url, moves),
        }
        remote.close()
    finally:
        server.terminate()
        server.wait(10)

    base50, base95 = percentiles(rows["local"])
    print(f"{args.env}, {args.steps} steps each, loopback\n")
    print(f"{'':18} {'p50 ms':>9} {'p95 ms':>9} {'p50 x local':>12} {'p95 x local':>12}")
    for name, timings in rows.items():
        p50, p95 = percentiles(timings)
        print(f"{name:18} {p50 * 1e3:9.3f} {p95 * 1e3:9.3f} {p50 / base50:12.1f} {p95 / base95:12.1f}")


if __name__ == "__main__":
    main()
