"""Latency of the Python sandbox next to a cold ``python -c`` subprocess, measured in the same run.

For two snippets (``print(1+1)`` and a small numpy computation) it prints p50/p95 latency per call of:

- ``cold python -c``: a fresh unsandboxed interpreter per call (what a naive tool pays);
- ``sandbox, no pool``: a fresh bubblewrap sandbox per call, started on demand;
- ``sandbox, warm workers``: sandboxes started ahead of time, one per call (``SandboxConfig(zygote=False)``);
- ``sandbox, zygote``: the default path of :func:`gem_core.tools.sandbox.run_python` in bwrap mode, one
  sandbox whose interpreter forks each call into namespaces of its own;

each sequentially and with 8 concurrent callers, and the ratio to the cold subprocess. Each caller
pauses ``--gap`` seconds between calls, as an agent does while the model writes its next turn (the pool
refills in that time); ``--gap 0`` measures back-to-back calls, where every call pays a worker start.

First it prints where a worker's start-up goes, each part timed alone (p50 of ``--calls`` runs):
``bwrap`` (namespaces, mounts and seccomp around ``/bin/true``), the interpreter with and without
``site`` (``-I`` vs ``-I -S``: the ``.pth`` hooks, an editable install's among them, that workers skip),
a whole worker start (bwrap + interpreter + preloads, until it reports ready), the per-call part of
a warm worker (hand over the snippet, the supervisor forks the child that runs it, collect the status),
and a zygote call (three forks, new namespaces and mounts, the snippet, the status).

Then (``--ray``, needs ``pip install -e '.[ray]'``) the same snippet through Ray: a local Ray on
loopback whose node advertises ``gem_sandbox``, calls made with ``sandbox_backend="ray"``
(:mod:`gem_core.tools.sandbox.ray_pool`) next to the local zygote, as a ratio; and the sandbox's
throughput per core: back-to-back calls (no gap) from ``2 x cores`` callers, calls/s divided by the
cores, locally and through Ray. That figure sizes a cluster (README, "Scaling out").

    python bench/python_tool.py [--calls 30] [--concurrency 8] [--gap 0.2] [--mode bwrap] [--ray]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gem_core.tools.sandbox import SandboxConfig, SandboxPool, resolve_mode
from gem_core.tools.sandbox.isolation import bwrap_launch
from gem_core.tools.sandbox.worker import Worker

SNIPPETS = {
    "print(1+1)": "print(1+1)",
    "numpy": "import numpy as np\nrng = np.random.default_rng(0)\nm = rng.random((100, 100))\nprint(float((m @ m).trace()))",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(call: Callable[[], None], calls: int, concurrency: int, gap: float) -> list[float]:
    """Per-call latencies of ``calls`` calls made by ``concurrency`` callers at once."""

    def timed(_: int) -> float:
        time.sleep(gap)
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    call()  # warm up (imports, first pool fill)
    if concurrency == 1:
        return [timed(i) for i in range(calls)]
    with ThreadPoolExecutor(concurrency) as executor:
        return list(executor.map(timed, range(calls)))


def p50_ms(call: Callable[[], None], calls: int) -> float:
    call()
    latencies = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - start)
    return statistics.median(latencies) * 1e3


def startup_parts(mode: str, calls: int) -> None:
    """Where a worker's start-up and a warm call go, each part measured on its own."""
    config = SandboxConfig(pool_size=0)

    def bwrap_true() -> None:
        launch = bwrap_launch(config, os.geteuid() == 0)
        try:
            subprocess.run([*launch.command, "/bin/true"], check=True, pass_fds=launch.fds)
        finally:
            launch.close()

    def interpreter(*flags: str) -> Callable[[], None]:
        return lambda: subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)

    def worker_start(preload: tuple[str, ...]) -> Callable[[], None]:
        def start() -> None:
            worker = Worker(mode, config, preload)
            worker.wait_ready()
            worker.close()

        return start

    request = {"code": "print(1+1)", "stdin": "", "memory_mb": 512, "cpu_seconds": 5, "file_mb": 16,
               "processes": 32, "open_files": 64, "call": None}
    warm_calls = []
    for _ in range(calls + 1):
        worker = Worker(mode, config, ())
        worker.wait_ready()
        start = time.perf_counter()
        worker.run(request, 30)
        warm_calls.append(time.perf_counter() - start)
    parts = []
    if mode == "bwrap":
        parts.append(("bwrap around /bin/true", p50_ms(bwrap_true, calls)))
    parts += [
        ("python -I -c pass (site, .pth hooks)", p50_ms(interpreter("-I"), calls)),
        ("python -I -S -c pass (as workers start)", p50_ms(interpreter("-I", "-S"), calls)),
        ("worker start, no preload", p50_ms(worker_start(()), calls)),
        ("worker start, numpy preloaded", p50_ms(worker_start(("numpy",)), calls)),
        ("warm worker: fork + run print(1+1)", statistics.median(warm_calls[1:]) * 1e3),
    ]
    if mode == "bwrap":
        zygote = SandboxPool(mode, SandboxConfig(pool_size=1, preload=()))
        try:
            parts.append(("zygote call: forks + run print(1+1)", p50_ms(lambda: zygote.run("print(1+1)"), calls)))
        finally:
            zygote.close()
    print(f"{'start-up part':<42} {'p50 ms':>8}")
    for name, value in parts:
        print(f"{name:<42} {value:>8.1f}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="calls per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent callers for the parallel rows")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds each caller waits between calls")
    parser.add_argument("--mode", default=None, help="sandbox mode (default: $GEM_SANDBOX or bwrap)")
    parser.add_argument("--pool-size", type=int, default=8, help="warm workers kept by the pool")
    parser.add_argument("--ray", action="store_true", help="also measure sandbox calls through Ray")
    parser.add_argument("--only-ray", action="store_true", help="measure only the Ray rows")
    args = parser.parse_args()
    mode = resolve_mode(args.mode)
    if args.only_ray:
        ray_rows(args, mode)
        return

    warm = SandboxPool(mode, SandboxConfig(pool_size=args.pool_size, zygote=False))
    zygote = SandboxPool(mode, SandboxConfig(pool_size=args.pool_size))
    unpooled = SandboxPool(mode, SandboxConfig(pool_size=0, preload=()))

    def cold(code: str) -> Callable[[], None]:
        return lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)

    def sandboxed(pool: SandboxPool, code: str) -> Callable[[], None]:
        def call() -> None:
            result = pool.run(code, timeout=30)
            assert result.ok, result

        return call

    print(f"mode={mode} calls={args.calls} concurrency={args.concurrency} gap={args.gap}s pool_size={args.pool_size}")
    startup_parts(mode, args.calls)
    header = f"{'snippet':<11} {'callers':>7}  {'runner':<22} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs cold':>12} {'calls/s':>8}"
    print(header)
    print("-" * len(header))
    try:
        for name, code in SNIPPETS.items():
            for concurrency in (1, args.concurrency):
                rows = [
                    ("cold python -c", cold(code)),
                    ("sandbox, no pool", sandboxed(unpooled, code)),
                    ("sandbox, warm workers", sandboxed(warm, code)),
                ]
                if mode == "bwrap":
                    rows.append(("sandbox, zygote", sandboxed(zygote, code)))
                baseline = None
                for runner, call in rows:
                    if runner == "sandbox, warm workers":
                        time.sleep(2.0)  # let the pool refill between measurements, as between turns
                    began = time.perf_counter()
                    latencies = measure(call, args.calls, concurrency, args.gap)
                    rate = args.calls / (time.perf_counter() - began)
                    p50, p95 = statistics.median(latencies), percentile(latencies, 0.95)
                    baseline = baseline or p50
                    print(
                        f"{name:<11} {concurrency:>7}  {runner:<22} {p50 * 1e3:>8.1f} {p95 * 1e3:>8.1f} "
                        f"{p50 / baseline:>11.2f}x {rate:>8.1f}"
                    )
    finally:
        warm.close()
        zygote.close()
        unpooled.close()
    if args.ray:
        ray_rows(args, mode)


def ray_rows(args: argparse.Namespace, mode: str) -> None:
    """print(1+1) through a Ray sandbox actor next to the local zygote, and calls/s per core of both."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback
    import ray

    from gem_core.tools.sandbox import default_pools, run_python

    cores = os.cpu_count() or 1
    ray.init(
        num_cpus=cores, resources={"gem_sandbox": 4 * cores}, include_dashboard=False, log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    code = SNIPPETS["print(1+1)"]

    def via(backend: str) -> Callable[[], None]:
        def call() -> None:
            result = run_python(code, timeout=30, mode=mode, backend=backend)
            assert result.ok, result

        return call

    print()
    header = f"{'through':<8} {'callers':>7} {'gap s':>6} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs local':>13} {'calls/s':>8} {'calls/s/core':>13}"
    print(header)
    print("-" * len(header))
    try:
        for concurrency, gap in ((1, args.gap), (args.concurrency, args.gap), (2 * cores, 0.0)):
            baseline = None
            for backend in ("local", "ray"):
                began = time.perf_counter()
                latencies = measure(via(backend), args.calls, concurrency, gap)
                rate = args.calls / (time.perf_counter() - began)
                p50, p95 = statistics.median(latencies), percentile(latencies, 0.95)
                baseline = baseline or p50
                print(
                    f"{backend:<8} {concurrency:>7} {gap:>6.1f} {p50 * 1e3:>8.1f} {p95 * 1e3:>8.1f} {p50 / baseline:>12.2f}x "
                    f"{rate:>8.1f} {rate / cores:>13.1f}"
                )
    finally:
        default_pools().close()
        ray.shutdown()
    print(f"({cores} cores; Ray's actor runs the node's own zygote, so the ray rows add one actor call per snippet)")


if __name__ == "__main__":
    main()
