"""Latency and throughput of the Python sandbox next to a cold ``python -c`` subprocess and GEM's figures, in one run.

GEM's Python tool runs each snippet as an unisolated ``python -c`` subprocess. GEM is not installed here,
so its figures are the ones issue 23 measured on this machine, quoted as constants and labelled as such
(``print(1+1)`` from 8 threads back to back: 155 calls/s); the ``cold python -c`` rows measure the same
kind of call in this run, so each table also has a same-run ratio.

First it prints where the time of a sandboxed call goes, each part timed alone (p50 of ``--calls`` runs):
``bwrap`` (namespaces, mounts and seccomp around ``/bin/true``), the seccomp filter's load (its CPU in a
forked child, as each zygote call pays it before its snippet), the interpreter with and without ``site``
(``-I`` vs ``-I -S``: the ``.pth`` hooks, an editable install's among them, that sandboxes skip), a fork
of an interpreter with numpy imported (fork, exit and wait: what the zygote pays once per call, mostly off
the hot path; its call's init shares the zygote's memory and costs no copy), a whole worker start (bwrap + interpreter + preloads, until it reports ready), the per-call
part of a warm worker, and a zygote call (hand the snippet to a call forked ahead of time, collect its
status).

Then one zygote call part by part (:func:`call_parts`, also alone with ``--only-parts``), from timestamps
recorded along its path (the host's steps, and the snippet's own clock readings inside the sandbox), next
to a fork+exit of an interpreter with numpy in alternating rounds, with the CPU a call costs on each side:
where the time over the fork floor goes, and the ratio issue 46 targets (<= 1.5x).

Then back-to-back ``print(1+1)`` (no pause between calls): p50 of one caller and calls/s of
``--concurrency`` callers through the zygote, against the cold subprocess of this run and GEM's quoted
figure, with the machine's load average (other jobs share its cores).

Then the full table: for two snippets (``print(1+1)`` and a small numpy computation) p50/p95 latency per
call of:

- ``cold python -c``: a fresh unsandboxed interpreter per call (what GEM's tool pays);
- ``sandbox, no pool``: a fresh bubblewrap sandbox per call, started on demand;
- ``sandbox, warm workers``: sandboxes started ahead of time, one per call (``SandboxConfig(zygote=False)``);
- ``sandbox, zygote``: the default path of :func:`gem_core.tools.sandbox.run_python` in bwrap mode, one
  sandbox whose interpreter forks calls ahead of time, each in namespaces of its own;

each sequentially and with 8 concurrent callers, and the ratio to the cold subprocess. Each caller
pauses ``--gap`` seconds between calls, as an agent does while the model writes its next turn.

Then (``--ray``, needs ``pip install -e '.[ray]'``) the same snippet through Ray: a local Ray on
loopback whose node advertises ``gem_sandbox``, calls made with ``sandbox_backend="ray"``
(:mod:`gem_core.tools.sandbox.ray_pool`) next to the local zygote, as a ratio; and the sandbox's
throughput per core: back-to-back calls (no gap) from ``2 x cores`` callers, calls/s divided by the
cores, locally and through Ray. That figure sizes a cluster (README, "Scaling out").

    python bench/python_tool.py [--calls 30] [--concurrency 8] [--gap 0.2] [--mode bwrap] [--ray] [--only-back-to-back] [--only-parts]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gem_core.tools.sandbox import SandboxConfig, SandboxPool, resolve_mode
from gem_core.tools.sandbox.accounting import process_tree
from gem_core.tools.sandbox.isolation import bwrap_launch
from gem_core.tools.sandbox.worker import Worker

#: GEM's Python tool (an unisolated ``python -c`` per call), measured in issue 23 on this machine: not
#: installed here, so quoted. ``print(1+1)`` from 8 threads back to back.
GEM_CALLS_PER_S_8_THREADS = 155.0
#: Issue 23's acceptance for the sandbox, back to back on 2 cores.
TARGET_P50_MS, TARGET_CALLS_PER_S = 3.0, 300.0

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
        parts.append(("seccomp filter load (CPU, each call)", seccomp_load_ms(max(calls, 100))))
    parts += [
        ("python -I -c pass (site, .pth hooks)", p50_ms(interpreter("-I"), calls)),
        ("python -I -S -c pass (as workers start)", p50_ms(interpreter("-I", "-S"), calls)),
        ("fork+exit of an interpreter with numpy", fork_p50_ms(calls)),
        ("worker start, no preload", p50_ms(worker_start(()), calls)),
        ("worker start, numpy preloaded", p50_ms(worker_start(("numpy",)), calls)),
        ("warm worker: fork + run print(1+1)", statistics.median(warm_calls[1:]) * 1e3),
    ]
    if mode == "bwrap":
        zygote = SandboxPool(mode, SandboxConfig(pool_size=1, preload=()))
        try:
            parts.append(("zygote call: hand over + run print(1+1)", p50_ms(lambda: zygote.run("print(1+1)"), calls)))
        finally:
            zygote.close()
    print(f"{'part of a call':<42} {'p50 ms':>8}")
    for name, value in parts:
        print(f"{name:<42} {value:>8.2f}")
    print()


FORK_PROBE = """
import os, statistics, sys, time
try:
    import numpy
except ImportError:
    pass
def batch(n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - start)
    return times
if sys.argv[1] == "serve":  # one line per batch asked on stdin: its times in ms
    for line in sys.stdin:
        print(" ".join(str(t * 1e3) for t in batch(int(line))), flush=True)
else:
    print(statistics.median(batch(int(sys.argv[1]))) * 1e3)
"""


#: Loads the compiled seccomp filter (stdin) in forked children, as each zygote call does before its snippet,
#: and prints the median CPU time of the load (ms). The kernel checks, converts and JIT-compiles the program and
#: fills its per-syscall cache by running it for every syscall number, so a longer program costs more.
SECCOMP_PROBE = """
import ctypes, os, statistics, sys, time
program = sys.stdin.buffer.read()
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(program, len(program))
filter_ = ctypes.byref(Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p)))
times = []
for _ in range(int(sys.argv[1])):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        start = time.thread_time_ns()
        loaded = libc.prctl(22, 2, filter_, 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        os.write(write, str(time.thread_time_ns() - start if loaded else -1).encode())
        os._exit(0)
    os.close(write)
    times.append(int(os.read(read, 64)))
    os.close(read)
    os.waitpid(pid, 0)
if min(times) < 0:
    sys.exit("the filter did not load")
print(statistics.median(times) / 1e6)
"""


def seccomp_load_ms(calls: int) -> float:
    """CPU of loading the sandbox's seccomp filter in a fresh process (median), as every zygote call does."""
    from gem_core.tools.sandbox.syscall_filter import compiled_filter

    done = subprocess.run([sys.executable, "-I", "-c", SECCOMP_PROBE, str(calls)], input=compiled_filter(),
                          capture_output=True, check=True)
    return float(done.stdout)


def fork_p50_ms(calls: int) -> float:
    """Fork, exit and wait of an interpreter with numpy imported, as the zygote's is (measured in a child)."""
    done = subprocess.run([sys.executable, "-I", "-c", FORK_PROBE, str(calls)], capture_output=True, text=True, check=True)
    return float(done.stdout)


#: The snippet of :func:`call_parts`: ``print(1+1)`` with the clock read where the snippet starts and ends
#: (``CLOCK_MONOTONIC`` is one clock for the host and every namespace of the sandbox).
TIMED_SNIPPET = "import time\n_t0 = time.monotonic()\nprint(1+1)\nprint(_t0, time.monotonic())"


def call_parts(calls: int, pool_size: int, rounds: int = 5) -> dict[str, float]:
    """Where one zygote call's time goes, from timestamps recorded along its path (p50 of ``calls``, ms),
    with the CPU one call costs on each side (host, and the zygote's tree, refill included).

    Host-side parts are timed by wrapping the functions of :mod:`gem_core.tools.sandbox.zygote` that
    :meth:`Zygote.run` calls in order; sandbox-side parts by the clock readings of the snippet itself:

    - ``take + ready``: a call forked ahead of time taken, its ready message (and PID) read;
    - ``still waiting``: the call checked to be waiting still, its init's PID read;
    - ``hand-over``: the request encoded and written on the call's pipe;
    - ``refill order``: the order for the replacement call sent to the zygote (after a short call's status,
      so inside ``teardown``);
    - ``to snippet start``: the snippet's process reads the request, sets limits, compiles, starts;
    - ``snippet``: the snippet itself;
    - ``to status``: the snippet's report and exit, the host woken by the report and the kernel's
      confirmation of the exit read (or, when it does not confirm the report, the call's PID 1's status);
      output collection and memory accounting, if a sample falls due, included;
    - ``teardown``: the call's PID 1 killed, its descriptors closed, the result built.
    """
    from gem_core.tools.sandbox import zygote as zygote_module

    stamps: dict[str, float] = {}

    def stamped(name: str, function: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            stamps[name.replace("refilled", "refill from")] = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                stamps[name] = time.monotonic()

        return wrapper

    originals = {
        "started": zygote_module._ForkedCall.started, "hand_over": zygote_module._ForkedCall.hand_over,
        "top_up": zygote_module.Zygote._top_up, "watch": zygote_module.watch,
        "waiting": zygote_module._init_of_waiting_call,
    }
    pool = SandboxPool("bwrap", SandboxConfig(pool_size=pool_size))
    parts: dict[str, list[float]] = {}
    try:
        zygote_module._ForkedCall.started = stamped("ready", originals["started"])
        zygote_module._ForkedCall.hand_over = stamped("handed", originals["hand_over"])
        zygote_module.Zygote._top_up = stamped("refilled", originals["top_up"])
        zygote_module.watch = stamped("status", originals["watch"])
        zygote_module._init_of_waiting_call = stamped("waiting", originals["waiting"])
        pool.run("pass", timeout=30)
        interpreter = next(pid for pid, depth in process_tree(pool.zygote().process.pid) if depth == 3)
        probe = subprocess.Popen([sys.executable, "-I", "-c", FORK_PROBE, "serve"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        floor: list[float] = []
        ratios: list[float] = []
        cpu_seconds = own_seconds = 0.0
        try:
            for round_calls in _rounds(calls, rounds):
                probe.stdin.write(f"{round_calls}\n")
                probe.stdin.flush()
                round_floor = [float(value) for value in probe.stdout.readline().split()]
                floor += round_floor
                cpu_before, own_before = _cpu_seconds(interpreter), _own_cpu_seconds()
                round_calls_ms = []
                for _ in range(round_calls):
                    stamps.clear()
                    began = time.monotonic()
                    result = pool.run(TIMED_SNIPPET, timeout=30)
                    ended = time.monotonic()
                    snippet_start, snippet_end = (float(value) for value in result.stdout.split()[1:3])
                    for name, (a, b) in {
                        "take + ready": (began, stamps["ready"]),
                        "still waiting": (stamps["ready"], stamps["waiting"]),
                        "hand-over": (stamps["waiting"], stamps["handed"]),
                        "refill order": (stamps["refill from"], stamps["refilled"]),
                        "to snippet start": (stamps["handed"], snippet_start),
                        "snippet": (snippet_start, snippet_end),
                        "to status": (snippet_end, stamps["status"]),
                        "teardown": (stamps["status"], ended),
                        "whole call": (began, ended),
                    }.items():
                        parts.setdefault(name, []).append((b - a) * 1e3)
                    round_calls_ms.append((ended - began) * 1e3)
                time.sleep(0.05)
                pool.run("pass", timeout=30)  # the zygote reaps the calls that ended when next asked for one
                cpu_seconds += _cpu_seconds(interpreter) - cpu_before
                own_seconds += _own_cpu_seconds() - own_before
                ratios.append(statistics.median(round_calls_ms) / statistics.median(round_floor))
        finally:
            probe.stdin.close()
            probe.wait()
        sandbox_cpu = cpu_seconds / (calls + rounds) * 1e3
        host_cpu = own_seconds / (calls + rounds) * 1e3
    finally:
        zygote_module._ForkedCall.started, zygote_module._ForkedCall.hand_over = originals["started"], originals["hand_over"]
        zygote_module.Zygote._top_up, zygote_module.watch = originals["top_up"], originals["watch"]
        zygote_module._init_of_waiting_call = originals["waiting"]
        pool.close()
    table = {name: statistics.median(values) for name, values in parts.items()}
    table["fork+exit floor"] = statistics.median(floor)
    table["whole call / floor, median of rounds"] = statistics.median(ratios)
    table["CPU ms/call, host"] = host_cpu
    table["CPU ms/call, sandbox (refill included)"] = sandbox_cpu
    return table


def _rounds(calls: int, rounds: int) -> list[int]:
    """``calls`` split into ``rounds`` near-equal batches (each at least one)."""
    rounds = max(1, min(rounds, calls))
    return [calls // rounds + (1 if index < calls % rounds else 0) for index in range(rounds)]


def print_call_parts(calls: int, pool_size: int) -> dict[str, float]:
    table = call_parts(calls, pool_size)
    print(f"one zygote call, part by part, next to a fork+exit of an interpreter with numpy, in alternating rounds "
          f"(p50 of {calls} each); load average {load_average()}")
    for name, value in table.items():
        print(f"{name:<42} {value:>8.3f}")
    print(f"target: whole call <= 1.5x the fork+exit floor (median of the rounds' ratios: "
          f"{table['whole call / floor, median of rounds']:.2f}x)")
    print()
    return table


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and of the children it has reaped (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def back_to_back(mode: str, calls: int, concurrency: int, pool_size: int) -> None:
    """print(1+1) with no pause: one caller's p50, and calls/s of ``concurrency`` callers, vs GEM and a cold
    subprocess; and the CPU one call costs (this process plus the sandbox's), which the machine's other
    jobs do not change much, with the calls/s it allows on idle cores."""
    code = SNIPPETS["print(1+1)"]
    zygote = SandboxPool(mode, SandboxConfig(pool_size=pool_size))

    def cold() -> None:
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)

    def sandboxed() -> None:
        result = zygote.run(code, timeout=30)
        assert result.ok, result

    rows = []
    try:
        sandboxed()
        # bwrap, its init, the interpreter that made the zygote's PID namespace, then the zygote
        interpreter = next(pid for pid, depth in process_tree(zygote.zygote().process.pid) if depth == 3)
        for runner, call, cpu in (
            ("cold python -c (GEM's way)", cold, _children_cpu_seconds),
            ("sandbox, zygote", sandboxed, lambda: _cpu_seconds(interpreter)),
        ):
            sequential = statistics.median(measure(call, calls, 1, 0.0)) * 1e3
            cpu_before, own_before, began = cpu(), _own_cpu_seconds(), time.perf_counter()
            measure(call, calls * 4, concurrency, 0.0)
            rate = calls * 4 / (time.perf_counter() - began)
            time.sleep(0.2)
            call()  # the zygote reaps the calls that ended when it is next asked for one
            per_call = (cpu() - cpu_before + _own_cpu_seconds() - own_before) / (calls * 4 + 1)
            rows.append((runner, sequential, rate, per_call * 1e3))
    finally:
        zygote.close()
    cores = os.cpu_count() or 1
    cold_rate = rows[0][2]
    print(f"back to back, print(1+1): p50 of 1 caller, calls/s of {concurrency} callers; load average {load_average()} "
          f"on {cores} cores")
    header = f"{'runner':<32} {'p50 ms':>8} {'calls/s':>8} {'vs cold':>8} {'vs GEM':>8} {'CPU ms/call':>12} {'calls/s if idle':>16}"
    print(header)
    print("-" * len(header))
    print(f"{'GEM python -c (issue 23, quoted)':<32} {'':>8} {GEM_CALLS_PER_S_8_THREADS:>8.0f} {'':>8} {1.0:>7.2f}x")
    for runner, p50, rate, cpu_ms in rows:
        print(f"{runner:<32} {p50:>8.2f} {rate:>8.0f} {rate / cold_rate:>7.2f}x {rate / GEM_CALLS_PER_S_8_THREADS:>7.2f}x "
              f"{cpu_ms:>12.2f} {cores * 1e3 / cpu_ms:>16.0f}")
    _, p50, rate, _ = rows[-1]
    print(f"target: p50 <= {TARGET_P50_MS:.0f} ms ({'met' if p50 <= TARGET_P50_MS else 'missed'}), "
          f">= {TARGET_CALLS_PER_S:.0f} calls/s ({'met' if rate >= TARGET_CALLS_PER_S else 'missed'}); load average now "
          f"{load_average()} ('calls/s if idle': the cores divided by the CPU a call costs, host and sandbox)")
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
    parser.add_argument("--only-parts", action="store_true", help="measure only one zygote call part by part")
    parser.add_argument("--only-back-to-back", action="store_true", help="measure only the call parts and back-to-back rows")
    args = parser.parse_args()
    mode = resolve_mode(args.mode)
    if args.only_ray:
        ray_rows(args, mode)
        return
    if args.only_parts:
        print_call_parts(args.calls, args.pool_size)
        return
    print(f"mode={mode} calls={args.calls} concurrency={args.concurrency} gap={args.gap}s pool_size={args.pool_size}")
    startup_parts(mode, args.calls)
    if mode == "bwrap":
        print_call_parts(args.calls, args.pool_size)
        back_to_back(mode, args.calls, args.concurrency, args.pool_size)
    if args.only_back_to_back:
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
