"""What a GPU-only example (``examples/train_openrlhf.py``, ``train_oat.py``, ``train_rl2.py``) needs before it
launches, checked first, so a CPU machine gets one line naming everything missing instead of a traceback from
deep inside a framework's launcher. In the package, not beside the examples: each example is one file."""

from __future__ import annotations

import importlib.util
import shutil

__all__ = ["require_gpu_stack"]


def require_gpu_stack(
    example: str, *, packages: tuple[str, ...] = (), launcher: str | None = None, install: str = "", dry_run: bool = True
) -> None:
    """Return if CUDA, the ``launcher`` executable and the Python ``packages`` are all there.

    Args:
        example: the example's file name, the start of the message.
        packages: import names the launch needs (``"vllm"``, ``"ray"``, ...).
        launcher: an executable that must be on ``PATH`` (``"torchrun"``), or None.
        install: the install line the message ends with.
        dry_run: whether the example has ``--dry-run`` (then the message points to it).

    Raises:
        SystemExit: with one line naming everything missing (exit status 1), before anything is written.
    """
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if launcher is not None and shutil.which(launcher) is None:
        missing.append(f"the `{launcher}` launcher")
    if importlib.util.find_spec("torch") is None:
        missing.append("torch")
    else:
        import torch

        if not torch.cuda.is_available():
            missing.append("a CUDA GPU")
    if missing:
        hint = f" ({install})" if install else ""
        dry = " Use --dry-run to print the command only." if dry_run else ""
        raise SystemExit(f"{example} cannot launch here, missing: {', '.join(missing)}{hint}.{dry}")
