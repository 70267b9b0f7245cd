"""Pools are sized by the CPUs this process may use, not by the machine's count: a SLURM job given 8 CPUs
of a 192-core node (its affinity mask), or a container under ``--cpus 2`` (a cgroup quota), sees the whole
machine in ``os.cpu_count()``, and a pool sized by it starts a worker per core of the node."""

from __future__ import annotations

import os

import pytest

from gem_core.cpus import cgroup_cpu_quota, usable_cpus
from gem_core.envs.scoring_pool import ScoringPool
from gem_core.envs.swe.build import _workers
from gem_core.tools.sandbox import SandboxConfig, SandboxPool


@pytest.fixture
def two_of_64_cpus(monkeypatch):
    """A process pinned to two CPUs of a 64-core machine, with no cgroup quota."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5})
    monkeypatch.setattr("gem_core.cpus.cgroup_cpu_quota", lambda: None)


def test_the_pools_of_a_process_pinned_to_two_cpus_are_sized_by_them(two_of_64_cpus):
    assert usable_cpus() == 2
    assert ScoringPool().max_workers == 2  # was 64: 64 grading workers of up to 2 GiB each
    assert _workers(16) == 2  # the SWE pack's parallel checks
    pool = SandboxPool("process", SandboxConfig(pool_size=8))
    try:
        pool._ensure_refillers()
        assert len(pool._refillers) == 1  # one start at a time on two CPUs, as on a 2-core machine
    finally:
        pool.close()


def _cgroup(tmp_path, limits: dict[str, str], membership: str = "0::/jobs/job7\n"):
    root = tmp_path / "cgroup"
    for relative, cpu_max in limits.items():
        folder = root / relative
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cpu.max").write_text(cpu_max)
    (root / "jobs" / "job7").mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "self-cgroup"
    proc.write_text(membership)
    return {"cgroup_root": root, "proc_cgroup": proc}


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"jobs/job7": "200000 100000\n"}, 2.0),  # docker --cpus 2
        ({"jobs/job7": "150000 100000\n"}, 1.5),
        ({"jobs/job7": "max 100000\n", "jobs": "400000 100000\n"}, 4.0),  # a limit on a parent counts
        ({"jobs/job7": "300000 100000\n", "jobs": "100000 100000\n"}, 1.0),  # the tightest one
        ({"jobs/job7": "max 100000\n"}, None),
        ({}, None),
    ],
)
def test_a_cgroup_v2_cpu_quota_is_read_up_to_the_root(tmp_path, limits, expected):
    assert cgroup_cpu_quota(**_cgroup(tmp_path, limits)) == expected


def test_no_cgroup_v2_membership_means_no_quota(tmp_path):
    paths = _cgroup(tmp_path, {"jobs/job7": "100000 100000\n"}, membership="4:memory:/x\n1:cpu:/\n")
    assert cgroup_cpu_quota(**paths) is None


def test_a_quota_below_the_affinity_rounds_up_and_bounds_the_count(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr("gem_core.cpus.cgroup_cpu_quota", lambda: 1.5)
    assert usable_cpus() == 2
    monkeypatch.setattr("gem_core.cpus.cgroup_cpu_quota", lambda: 0.2)
    assert usable_cpus() == 1
