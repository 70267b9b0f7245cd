"""How many CPUs this process may use, which is what GEM sizes its worker pools by.

``os.cpu_count()`` is the machine's count. A SLURM job given 8 CPUs of a 192-core node (its affinity
mask), or a container under ``docker run --cpus 2`` or a Kubernetes CPU limit (a cgroup v2 quota), sees
the whole machine there, and a pool sized by it starts a worker per core of the node: grading workers of
up to 2 GiB each, contending for the few CPUs the job has.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["cgroup_cpu_quota", "usable_cpus"]


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), bounded by its cgroup's CPU quota, rounded up."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        count = min(count, math.ceil(quota))
    return max(1, count)


def cgroup_cpu_quota(cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The tightest cgroup v2 CPU quota (``cpu.max``: quota over period, in CPUs) on this process's cgroup and
    its ancestors; None where there is none, or no cgroup v2 (a v1 hierarchy is not read)."""
    try:
        membership = proc_cgroup.read_text()
    except OSError:
        return None
    relative = next((line[3:].strip() for line in membership.splitlines() if line.startswith("0::")), None)
    if relative is None:
        return None
    folder = cgroup_root / relative.lstrip("/")
    tightest = None
    for limit_file in [folder / "cpu.max", *(parent / "cpu.max" for parent in folder.parents if parent.is_relative_to(cgroup_root))]:
        try:
            quota, period = limit_file.read_text().split()[:2]
            cpus = None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError, ZeroDivisionError):
            continue
        if cpus is not None:
            tightest = cpus if tightest is None else min(tightest, cpus)
    return tightest
