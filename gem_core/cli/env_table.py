"""What ``gem list`` says of each env beside its id: where its data comes from and which pip extra it needs.

A new user meets a hub download (and, offline, a failure) or a missing extra only when making the env;
the registry's specs already know both (``dataset_path``/``data_files`` kwargs, :attr:`EnvSpec.extras`),
so the listing states them up front.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from gem_core.registry import EnvSpec, spec

__all__ = ["EXTRA_MODULES", "env_rows", "data_source", "missing_extras"]

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "math": ("math_verify", "datasets"),
    "code": ("datasets",),
    "qa": ("datasets", "httpx"),
    "rg": ("reasoning_gym",),
    "vision": ("PIL",),
    "judge": ("openai", "httpx", "datasets"),
}
"""The modules that tell whether an extra of pyproject.toml is installed (its packages' import names)."""


def data_source(env_spec: EnvSpec) -> str:
    """``"shipped data"`` (rows in the package), ``"hub data: ORG/NAME"`` (downloaded on first use) or ``"-"``."""
    if env_spec.kwargs.get("data_files"):
        return "shipped data"
    if env_spec.kwargs.get("dataset_path"):
        return f"hub data: {env_spec.kwargs['dataset_path']}"
    return "-"


def missing_extras(env_spec: EnvSpec) -> list[str]:
    """The env's extras whose packages do not import here (found without importing them)."""
    return [extra for extra in env_spec.extras
            if any(importlib.util.find_spec(module) is None for module in EXTRA_MODULES.get(extra, ()))]


def _needs(env_spec: EnvSpec) -> str:
    if not env_spec.extras:
        return "-"
    needs = f"needs extra {','.join(env_spec.extras)}"
    missing = missing_extras(env_spec)
    return f"{needs} (not installed: pip install -e \".[{','.join(missing)}]\")" if missing else needs


def env_rows(ids: Sequence[str]) -> list[str]:
    """One aligned line per id: the id, its data source, the extras it needs (the id stays the first word)."""
    cells = [(env_id, data_source(spec(env_id)), _needs(spec(env_id))) for env_id in ids]
    id_width = max(len(c[0]) for c in cells)
    data_width = max(len(c[1]) for c in cells)
    return [f"{env_id:<{id_width}}  {data:<{data_width}}  {needs}".rstrip() for env_id, data, needs in cells]
