"""Training runs of ``examples/train_trl.py`` for the learning benches (``compare.py``, ``curriculum.py``).

Why: both benches train many runs of the main job's recipe, each in its own folder with its console output
kept aside and its metrics saved with the spec that produced them, so that ``--resume`` reuses a finished run
only for the same spec. This module holds that scaffolding; each bench keeps what it measures.

The benches are run as files, so this module is imported by its file's folder (``bench/learning`` on
``sys.path``). A parallel ``train_all`` runs the bench's own ``run_one`` in spawned interpreters, which
re-run the bench script as ``__mp_main__`` before they unpickle it: the worker must be a module-level
function of the bench script (or of an importable module), not a closure.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar

from gem_core.testing import load_script

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_trl.py"


class NamedSpec(Protocol):
    """A bench's run spec: frozen (a dict key) and named by the folder under ``<out>/runs`` it trains in."""

    @property
    def name(self) -> str: ...


Spec = TypeVar("Spec", bound=NamedSpec)


def load_example() -> ModuleType:
    """``examples/train_trl.py`` as a module: the main job's recipe is used as is, not copied."""
    return load_script(EXAMPLE, "train_trl")


def train_example(arg_values: dict[str, Any], spec: dict, out: str) -> dict:
    """Train ``train_trl.main(Args(**arg_values, out=out))`` with one torch thread, its console output and warnings
    in ``out/stdout.txt``; its metrics, saved with ``spec`` in ``out/metrics.json`` (what ``--resume`` compares)."""
    import torch

    torch.set_num_threads(1)  # a run's numbers must not depend on what runs beside it
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    example = load_example()
    args = example.Args(**arg_values, out=out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "stdout.txt"), "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        metrics = example.main(args)
    metrics["spec"] = spec
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    return metrics


def finished_run(path: Path, spec: dict, steps: int, same_spec: Callable[[dict], bool] | None = None) -> dict | None:
    """The metrics saved at ``path`` by a run that finished all ``steps`` with this ``spec``, or None.

    ``same_spec`` decides whether the saved spec counts as ``spec`` (default: equal); a bench whose spec
    gained fields after runs were saved passes a rule that fills them in. The returned metrics carry ``spec``."""
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same = same_spec or (lambda saved: saved == spec)
    if not same(metrics.get("spec", {})) or metrics.get("interrupted") or metrics.get("steps") != steps:
        return None
    metrics["spec"] = spec
    return metrics


def train_all(
    specs: Sequence[Spec],
    out: Path,
    jobs: int,
    resume: bool,
    run_one: Callable[[Spec, str], dict],
    reusable: Callable[[Path, Spec], dict | None],
    progress: Callable[[list[Spec]], AbstractContextManager] | None = None,
) -> tuple[list[dict], int]:
    """Every run's metrics in the order of ``specs`` and how many runs were trained (not reused).

    With ``resume``, a run whose ``reusable(<out>/runs/<name>/metrics.json, spec)`` gives metrics is not trained
    again. The rest run ``run_one(spec, "<out>/runs/<name>")`` one after another in this process (``jobs`` <= 1)
    or in ``jobs`` spawned interpreters, a fresh one per run (no state carried over); ``run_one`` must be picklable
    by reference then. ``progress(todo)``, if given, is entered around the training of the runs in ``todo``."""
    results: dict[Spec, dict] = {}
    for spec in specs:
        if resume and (metrics := reusable(out / "runs" / spec.name / "metrics.json", spec)):
            results[spec] = metrics
    todo = [spec for spec in specs if spec not in results]
    with progress(todo) if progress is not None else contextlib.nullcontext():
        if jobs <= 1:
            for spec in todo:
                results[spec] = run_one(spec, str(out / "runs" / spec.name))
        else:
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, max_tasks_per_child=1) as pool:
                futures = {pool.submit(run_one, spec, str(out / "runs" / spec.name)): spec for spec in todo}
                for future in concurrent.futures.as_completed(futures):
                    results[futures[future]] = future.result()
    return [results[spec] for spec in specs], len(todo)
