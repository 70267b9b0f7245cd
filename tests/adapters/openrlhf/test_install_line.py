"""The docs' OpenRLHF install lines (docs/frameworks/openrlhf.md) are the ones the ``openrlhf`` nox session runs, and work without CUDA.

``pip install "openrlhf==0.11.2"`` with its requirements fails on a CPU machine (flash-attn 2.8.3 is an sdist
whose build imports torch), so the extra lists only the light dependencies and OpenRLHF goes in ``--no-deps``.
Reads text only: no install runs here (the nox session's own install is the proof that the lines work).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PIN = "openrlhf==0.11.2"


def _docs_lines() -> list[str]:
    """The commands of the OpenRLHF page's install block (its first code block)."""
    page = (ROOT / "docs" / "frameworks" / "openrlhf.md").read_text()
    block = re.search(r"```bash\n(.*?)```", page, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.startswith("pip install")]


def _session_source() -> str:
    source = (ROOT / "noxfile.py").read_text()
    return source.split("def openrlhf(", 1)[1].split("\n@nox.session", 1)[0]


def test_the_docs_install_the_extra_then_openrlhf_without_its_requirements():
    assert _docs_lines() == [
        'pip install -c constraints-cpu.txt -e ".[openrlhf]"',
        f'pip install -c constraints-cpu.txt --no-deps "{PIN}"',
    ]


def test_the_nox_session_installs_the_same_way():
    session = _session_source()
    assert '"-e", ".[openrlhf,dev]"' in session
    assert f'"--no-deps", "{PIN}"' in session


def test_the_extra_cannot_pull_openrlhf_s_gpu_requirements():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any(dep.startswith(("openrlhf", "flash-attn", "deepspeed")) for dep in extras["openrlhf"]), extras["openrlhf"]
    # what openrlhf.utils.agent imports beyond GEM's rollout extra, and the transformers OpenRLHF 0.11.2 pins
    assert {"aiohttp", "pylatexenc", "transformers==5.15.0"} <= set(extras["openrlhf"])


def test_the_version_error_names_both_lines():
    from gem_adapters.openrlhf.agent import SUPPORTED_OPENRLHF

    assert SUPPORTED_OPENRLHF.install_hint == (
        f'Install the supported version with `pip install -e ".[openrlhf]" && pip install --no-deps "{PIN}"` ({PIN}).'
    )
