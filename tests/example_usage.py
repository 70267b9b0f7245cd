"""What the examples' usage tests share: the check the GPU examples' tests make (train_verl/openrlhf/rl2.py: a
bad option is one line naming it, exit 2, argparse's usage-error code, and nothing is written where the example
would write), and the runner that tells whether a bad option was refused before torch loaded (train_trl.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: ``python -c RUN_AND_REPORT_TORCH SCRIPT ARGS`` runs SCRIPT as ``__main__`` and ends its stdout with whether
#: torch was imported.
RUN_AND_REPORT_TORCH = (
    "import runpy, sys\n"
    "sys.argv = sys.argv[1:]\n"
    "try:\n"
    "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "finally:\n"
    "    print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n"
)


def assert_one_usage_line_and_nothing_written(example: str, argv: list[str], message: str, tmp_path: Path, *, out_flag: str) -> None:
    """Run ``examples/<example>`` in ``tmp_path`` with ``argv`` (``{a_file}`` in a word or the message is a file
    there; ``out_flag`` points into ``tmp_path`` unless ``argv`` gives it) and check the refusal."""
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    argv = [word.format(a_file=a_file) for word in argv]
    if out_flag not in argv:
        argv += [out_flag, str(tmp_path / "out")]
    done = subprocess.run([sys.executable, str(EXAMPLES / example), *argv], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"{example}: error: ") and message.format(a_file=a_file) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and a_file.read_text() == "mine"
    assert done.stdout == ""
