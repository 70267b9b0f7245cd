"""The project's throughput table in one command: printed, and written as JSON.

No project in this field publishes text-env throughput; this table is ours, measured on the machine it
runs on (named in the output, with its load average: on a shared machine other jobs take their share).
Rows:

- env steps/s per family, one env stepped by a scripted action, reset whenever an episode ends (resets
  in the time): games (random moves), math and logic (a boxed answer, graded), code (a Python answer run
  against the tests in the sandbox), terminal (a shell command in the sandbox), swe (a tool call);
- episodes/s of ``game:GuessTheNumber-v0`` with a scripted policy (random guesses): through
  :class:`~gem_core.rollout.EpisodeSession` (token bookkeeping included, an in-process tokenizer) and
  through each vector backend (``sync``, ``thread``, ``async``, ``process``; 8 envs, autoreset);
- the sandbox: start (a fresh bubblewrap sandbox per call, ``print(1+1)``) and exec (a call through the
  warm zygote) p50/p99;
- grades/s: math (math-verify in its grader worker) and code (the sandbox), 4 envs on the thread backend;
- ``gem serve``: step latency p50/p99 of a served game over HTTP on 127.0.0.1, next to the same env in
  process.

    python bench/report.py [--out bench/results/report.json] [--quick]

About 2 to 4 minutes on 2 shared cores; ``--quick`` (a smoke test, well under a minute) shortens every
budget, so its figures are rough. The existing benches' functions do the measuring where they exist
(:mod:`game_speed`, :mod:`vector_throughput`, :mod:`grading`, :mod:`remote_latency`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "report.json"


@dataclass
class Row:
    """One figure of the table."""

    section: str
    name: str
    value: float
    unit: str
    note: str = ""


@dataclass
class Budget:
    """How long each kind of row measures."""

    seconds: float  # per steps/s or episodes/s row
    sandbox_calls: int
    serve_steps: int

    @classmethod
    def for_mode(cls, quick: bool) -> Budget:
        # quick: every row measured at least once (its smoke test, tests/core/test_bench_report.py, runs in every
        # CI run); 0.1 s a rate row keeps its 15 such rows at ~1.5 s of the run instead of 7.5.
        return cls(0.1, 8, 40) if quick else cls(4.0, 100, 400)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


#: (family, env id, scripted action or None for the env's random action, note)
FAMILIES = [
    ("games", "game:GuessTheNumber-v0", None, "random moves"),
    ("games", "game:Wordle-v0", None, "random moves"),
    ("games", "game:Minesweeper-v0-hard", None, "random moves"),
    ("math", "math:Sample", "\\boxed{3}", "one answer repeated: math-verify's parse cache warm (grades/s below: fresh answers)"),
    ("logic", "logic:Sample", "\\boxed{True}", "one-turn episodes"),
    ("code", "code:Sample", "```python\nprint(1)\n```", "print(1): a wrong answer, run against the row's tests"),
    ("terminal", "terminal:Tasks-v0", "```bash\nls\n```", "a shell command in the sandbox"),
    ("swe sample", "swe:Sample-v0", _tool_call("run_tests"), "run_tests: the repository's tests in the sandbox"),
]


def env_steps_per_second(env_id: str, action: str | None, seconds: float) -> float:
    """Steps/s of one env with a scripted action, reset (timed) whenever an episode ends."""
    from game_speed import measure

    if action is None:
        return measure(env_id, seconds).per_second
    from gem_core import make

    env = make(env_id)
    try:
        env.reset(seed=0)
        env.step(action)  # warm-up: graders, sandboxes and imports start on first use
        env.reset(seed=1)
        steps, seed, start = 0, 2, time.perf_counter()
        while time.perf_counter() - start < seconds or steps == 0:
            _, _, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated:
                env.reset(seed=seed)
                seed += 1
        return steps / (time.perf_counter() - start)
    finally:
        env.close()


def session_episodes_per_second(seconds: float, env_id: str = "game:GuessTheNumber-v0") -> float:
    """Episodes/s of a scripted policy (the env's random move, its ids encoded once per text) through
    :class:`EpisodeSession`, 32 episodes in flight on one event loop."""
    import gem_core
    from gem_core.rollout import ChatTemplate, EpisodeSession
    from gem_core.testing import make_tokenizer

    tokenizer = make_tokenizer("chatml")
    template = ChatTemplate.for_tokenizer(tokenizer)
    end_of_turn = list(template.end_of_turn_ids)
    cache: dict[str, list[int]] = {}

    def ids_of(text: str) -> list[int]:
        if text not in cache:
            cache[text] = tokenizer.encode(text, add_special_tokens=False) + end_of_turn
        return cache[text]

    async def play() -> float:
        live = [EpisodeSession(gem_core.make(env_id), tokenizer, chat_template=template) for _ in range(32)]
        for seed, session in enumerate(live):
            await session.start(seed=seed)
        episodes, seed, start = 0, len(live), time.perf_counter()
        while time.perf_counter() - start < seconds or episodes == 0:
            for session in live:
                ids = ids_of(session.env.sample_random_action())
                await session.step(ids, logprobs=[-1.0] * len(ids), finish_reason="stop")
                if session.done:
                    session.trajectory()
                    episodes += 1
                    await session.start(seed=seed)
                    seed += 1
        return episodes / (time.perf_counter() - start)

    return asyncio.run(play())


def vector_episodes_per_second(backend: str, seconds: float, num_envs: int = 8, env_id: str = "game:GuessTheNumber-v0") -> float:
    """Episodes/s through one vector backend (random guesses, autoreset): episodes ended per second."""
    import numpy as np
    from vector_throughput import guess_actions

    from gem_core.vector import make_vec

    vec = make_vec(env_id, num_envs=num_envs, backend=backend, seed=0)
    rng = np.random.default_rng(0)
    try:
        vec.reset()
        vec.step(guess_actions(num_envs, rng))  # warm-up (thread pool, event loop, worker processes)
        episodes, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or episodes == 0:
            _, _, terminated, truncated, _ = vec.step(guess_actions(num_envs, rng))
            episodes += int(np.count_nonzero(np.logical_or(terminated, truncated)))
        return episodes / (time.perf_counter() - start)
    finally:
        vec.close()


def sandbox_latencies(calls: int) -> dict[str, list[float]]:
    """Seconds per ``print(1+1)``: a fresh sandbox per call (start + exec) and a call through the zygote."""
    from gem_core.tools.sandbox import SandboxConfig, SandboxPool, resolve_mode

    mode = resolve_mode(None)
    found: dict[str, list[float]] = {}
    for name, config in (("start", SandboxConfig(pool_size=0)), ("exec", SandboxConfig())):
        pool = SandboxPool(mode, config)
        try:
            pool.run("print(1+1)", timeout=60)  # warm-up (zygote start, imports)
            times = []
            for _ in range(calls if name == "exec" else max(4, calls // 4)):
                start = time.perf_counter()
                result = pool.run("print(1+1)", timeout=60)
                times.append(time.perf_counter() - start)
                if not result.ok:
                    raise RuntimeError(f"a sandbox call failed: {result}")
            found[name] = times
        finally:
            pool.close()
    return found


def math_grades_per_second(seconds: float) -> float:
    from grading import grades_per_second, write_table

    with tempfile.TemporaryDirectory() as directory:
        return grades_per_second("thread", "worker", write_table(Path(directory)), 4, seconds, 0)


def code_grades_per_second(seconds: float, num_envs: int = 4) -> float:
    """Grades/s of ``code:Sample``: each step runs a Python answer against the row's tests in the sandbox."""
    from gymnasium.vector import AutoresetMode

    from gem_core.vector import make_vec

    actions = ["```python\nprint(input())\n```"] * num_envs
    vec = make_vec("code:Sample", num_envs=num_envs, backend="thread", autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        vec.reset(seed=0)
        vec.step(actions)  # warm-up
        grades, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or grades == 0:
            vec.step(actions)
            grades += num_envs
        return grades / (time.perf_counter() - start)
    finally:
        vec.close()


def serve_latencies(steps: int, env_id: str = "game:GuessTheNumber-v0") -> dict[str, list[float]]:
    """Seconds per step of ``env_id`` in process and behind ``gem serve`` (HTTP, 127.0.0.1)."""
    from remote_latency import actions, time_steps

    from gem_core import make
    from gem_core.serve.remote import RemoteEnv

    server = subprocess.Popen(
        [sys.executable, "-m", "gem_core.cli", "serve", env_id, "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = server.stdout.readline()
        found = re.search(r"at (http://\S+)", line)
        if found is None:
            raise RuntimeError(f"gem serve did not start: {line!r}")
        moves = actions(steps)
        local = make(env_id)
        remote = RemoteEnv(found.group(1), env_id, timeout=30)
        try:
            return {
                "in process": time_steps(lambda s: local.reset(seed=s), local.step, moves),
                "gem serve (HTTP)": time_steps(lambda s: remote.reset(seed=s), remote.step, moves),
            }
        finally:
            remote.close()
    finally:
        server.terminate()
        server.wait(10)


def machine() -> dict:
    """What the figures were measured on."""
    try:
        model = next(
            line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown"
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg()[:3] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def measure(budget: Budget, progress: Callable[[str], None] = lambda _: None) -> list[Row]:
    """Every row of the table, in order."""
    rows: list[Row] = []
    for family, env_id, action, note in FAMILIES:
        progress(env_id)
        rows.append(Row("env steps/s", f"{family}: {env_id}", env_steps_per_second(env_id, action, budget.seconds), "steps/s", note))
    progress("EpisodeSession")
    rows.append(Row("episodes/s, scripted policy", "EpisodeSession (32 in flight)", session_episodes_per_second(budget.seconds),
                    "episodes/s", "game:GuessTheNumber-v0, token bookkeeping included"))
    for backend in ("sync", "thread", "async", "process"):
        progress(f"vector {backend}")
        rows.append(Row("episodes/s, scripted policy", f"vector {backend} (8 envs)", vector_episodes_per_second(backend, budget.seconds),
                        "episodes/s", "game:GuessTheNumber-v0"))
    progress("sandbox")
    from gem_core.tools.sandbox import resolve_mode

    mode = resolve_mode(None)
    for name, times in sandbox_latencies(budget.sandbox_calls).items():
        note = f"{mode} mode, " + ("a fresh sandbox per call" if name == "start" else "through the warm pool (bwrap: the zygote)")
        for q in (0.5, 0.99):
            rows.append(Row("sandbox, print(1+1)", f"{name} p{round(q * 100)}", _quantile(times, q) * 1e3, "ms", note))
    progress("grades")
    rows.append(Row("grades/s", "math (math-verify, grader worker)", math_grades_per_second(budget.seconds), "grades/s", "4 envs, thread"))
    rows.append(Row("grades/s", "code (sandboxed tests)", code_grades_per_second(budget.seconds), "grades/s", "4 envs, thread"))
    progress("gem serve")
    for name, times in serve_latencies(budget.serve_steps).items():
        for q in (0.5, 0.99):
            rows.append(Row("step latency, game:GuessTheNumber-v0", f"{name} p{round(q * 100)}", _quantile(times, q) * 1e3, "ms"))
    return rows


def render(rows: list[Row], info: dict) -> str:
    """The table as Markdown (what the README shows)."""
    load = info["machine"]["load_average"]
    lines = [
        f"Measured {info['date']} with `python bench/report.py{' --quick' if info['quick'] else ''}` on "
        f"{info['machine']['cores']} cores ({info['machine']['cpu']}), load average "
        f"{' '.join(f'{value:.1f}' for value in load) if load else 'unknown'} at the start; Python {info['machine']['python']}.",
        "",
        "| section | row | value | unit | note |",
        "|---|---|---:|---|---|",
    ]
    for row in rows:
        value = f"{row.value:,.0f}" if row.value >= 100 else f"{row.value:.2f}" if row.value >= 1 else f"{row.value:.3f}"
        lines.append(f"| {row.section} | {row.name} | {value} | {row.unit} | {row.note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where the JSON goes (default {DEFAULT_OUT})")
    parser.add_argument("--quick", action="store_true", help="short budgets: a smoke test, rough figures")
    args = parser.parse_args(argv)
    random.seed(0)
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "quick": args.quick,
    }
    began = time.perf_counter()
    rows = measure(Budget.for_mode(args.quick), lambda what: print(f"measuring {what} ...", file=sys.stderr, flush=True))
    info["seconds"] = round(time.perf_counter() - began, 1)
    report = {**info, "rows": [asdict(row) for row in rows]}
    print(render(rows, info))
    print(f"\n({info['seconds']} s; written to {args.out})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
