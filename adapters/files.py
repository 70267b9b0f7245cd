"""Files a framework loads by path, shipped inside the package so a wheel install has them too.

OpenRLHF (``--train.agent_func_path``), RL2 (``rollout.env_path``) and verl
(``agent_loop_config_path``) read these by file name, not by import, so they live as package data::

    python -m gem_adapters.files                       # list them with their paths
    python -m gem_adapters.files openrlhf-agent > gem_agent.py   # a copy to edit
    python -m gem_adapters.files openrlhf-agent --path           # the installed file, to pass as is
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path

from gem_core.errors import UnknownKey

__all__ = ["SHIPPED_FILES", "shipped_file", "shipped_path", "main"]

SHIPPED_FILES: dict[str, tuple[str, str, str]] = {
    "verl-agent-loop": ("gem_adapters.verl", "gem_agent_loop.yaml",
                        "verl: actor_rollout_ref.rollout.agent.agent_loop_config_path=FILE"),
    "openrlhf-agent": ("gem_adapters.openrlhf", "files/gem_agent.py", "OpenRLHF: --train.agent_func_path FILE"),
    "rl2-generate": ("gem_adapters.rl2", "files/gem_env.py", "RL2 main (from source): rollout.env_path=FILE"),
    "rl2-reset-step": ("gem_adapters.rl2", "files/gem_env_pypi.py", "rl-square 0.0.2 (PyPI): rollout.env_path=FILE"),
}
"""The files a framework reads by path, by name: ``(package, file inside it, the framework setting that takes it)``."""


def shipped_file(name: str) -> Traversable:
    """The packaged resource called ``name`` (a key of :data:`SHIPPED_FILES`).

    Raises:
        UnknownKey: ``name`` is not a shipped file; the message lists the names.
    """
    try:
        package, relative, _ = SHIPPED_FILES[name]
    except KeyError:
        raise UnknownKey(f"no shipped file {name!r}; choose one of {', '.join(SHIPPED_FILES)}") from None
    return files(package).joinpath(relative)


def shipped_path(name: str) -> Path:
    """A real file system path to ``name``, for the frameworks that open it by path.

    Installed packages are plain directories (pip does not zip them), so the path outlives this call.
    """
    with as_file(shipped_file(name)) as path:
        return Path(path)


def main(argv: list[str] | None = None) -> int:
    """``python -m gem_adapters.files [NAME] [--path]``: list the shipped files, or print one's text or path.

    Args:
        argv: The command's arguments (None: ``sys.argv[1:]``).

    Returns:
        0; argparse exits with status 2 on an unknown name.
    """
    parser = argparse.ArgumentParser(prog="python -m gem_adapters.files", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", nargs="?", choices=sorted(SHIPPED_FILES), help="the file to print (default: list all)")
    parser.add_argument("--path", action="store_true", help="print the installed file's path instead of its text")
    args = parser.parse_args(argv)
    if args.name is None:
        for name, (_, _, use) in SHIPPED_FILES.items():
            print(f"{name:16} {shipped_path(name)}\n{'':16} {use}")
        return 0
    if args.path:
        print(shipped_path(args.name))
    else:
        sys.stdout.write(shipped_file(args.name).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
