"""Which RL2 env API is installed, and the dataset rows both APIs read.

RL2 changed its env hook without changing its version number: PyPI ``rl-square==0.0.2`` imports an
env file exporting ``async reset(extra_info)`` / ``async step(state, action, extra_info)``; RL2's
main branch (installed from source, still "0.0.2") imports one exporting ``async generate(config,
tokenizer, router_url, sample)``. The installed sources tell them apart, so an env file written for
the other API fails when RL2 loads it, with the file to use instead.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gem_adapters.framework_version import FrameworkVersionError
from gem_core.rows.label import EpisodeLabel, LabelError, parse_label

__all__ = ["RL2VersionError", "installed_rl2_api", "check_rl2_api", "row_label", "dataset_row"]

RL2Api = Literal["generate", "reset_step"]

_ENV_FILES = {"generate": "rl2-generate", "reset_step": "rl2-reset-step"}  # names in gem_adapters.files


class RL2VersionError(FrameworkVersionError):
    """The installed RL2 calls a different env hook than the env file implements."""


def installed_rl2_api() -> RL2Api | None:
    """``"generate"`` (RL2 main), ``"reset_step"`` (rl-square 0.0.2) or None (RL2 not installed / unknown).

    Reads RL2's sources instead of importing them: the rollout worker imports SGLang, which a
    CPU-only machine (or a test) does not have.
    """
    spec = importlib.util.find_spec("RL2")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    datasets_rl = root / "datasets" / "rl.py"
    rollout = root / "workers" / "rollout.py"
    if datasets_rl.exists() and "def add_env_response" in datasets_rl.read_text(encoding="utf-8"):
        return "generate"
    if rollout.exists() and "self.env.reset(" in rollout.read_text(encoding="utf-8"):
        return "reset_step"
    return None


def check_rl2_api(expected: RL2Api) -> None:
    """Raise :class:`RL2VersionError` if the installed RL2 calls another env hook than ``expected``.

    Env files call this at import, which RL2 does when its rollout worker starts.

    Args:
        expected: The hook the env file implements: ``"generate"`` (RL2 main) or ``"reset_step"`` (rl-square 0.0.2).

    Raises:
        RL2VersionError: RL2 is not installed (or its hook is not found), or it calls the other hook; the message
            names the env file to use instead.
    """
    found = installed_rl2_api()
    if found is None:
        raise RL2VersionError(
            "Could not find RL2's env hook: install RL2 from source (git clone ChenmienTan/RL2 && pip install -e .) "
            "for the env file `python -m gem_adapters.files rl2-generate --path`, or `pip install rl-square==0.0.2` "
            "for `python -m gem_adapters.files rl2-reset-step --path`."
        )
    if found != expected:
        raise RL2VersionError(
            f"The installed RL2 calls the {found!r} env hook but this env file implements {expected!r}: "
            f"set rollout.env_path=$(python -m gem_adapters.files {_ENV_FILES[found]} --path) instead."
        )


DATASET_HINT = "Build the dataset with `python -m gem_adapters.rl2 --env ENV_ID --n N --out train.jsonl`."


def row_label(row: Mapping[str, Any]) -> EpisodeLabel:
    """The episode of a dataset row: ``row["extra_info"]["label"]`` (as :func:`dataset_row` writes) or ``row["label"]``.

    Raises:
        LabelError: The row has no label, or the label is not JSON, lacks ``env_id`` or ``seed``, or names an unknown env.
    """
    extra = row.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    label = extra.get("label", row.get("label"))
    if label is None:
        raise LabelError(f"Dataset row {dict(row)!r} has no GEM label. {DATASET_HINT}")
    return parse_label(label, fix_hint=DATASET_HINT)


def dataset_row(label: EpisodeLabel) -> dict[str, Any]:
    """A dataset row both APIs read. No ``prompt`` key: rl-square 0.0.2 calls ``reset`` only without one."""
    return {"extra_info": {"label": label.to_json()}}
