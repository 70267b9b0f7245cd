"""What a GPU-only example needs before it launches, checked first so a CPU machine gets one line, not a traceback."""

from __future__ import annotations

import importlib.util
import shutil


def require_gpu_stack(
    example: str, *, packages: tuple[str, ...] = (), launcher: str | None = None, install: str = "", dry_run: bool = True
) -> None:
    """Exit with one line naming everything missing: CUDA, the launcher executable, the Python packages; it
    points to ``--dry-run`` where the example has one (``dry_run=False``: an example that launches in-process)."""
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
