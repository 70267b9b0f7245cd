"""Field bugs of the dataset command every adapter shares (gem_core.cli.dataset): a system prompt silently dropped, a
SIGTERM leaving the temporary file behind, an unwritable --out found only after every row was built, TRL's parquet
chosen by a lowercase suffix only, and bad env kwargs accepted under the Ray placement."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from gem_core import placement
from gem_core.cli.dataset import run_dataset_cli

ENV = ["--env", "game:GuessTheNumber-v0"]


def _never(rows, args):
    raise AssertionError("the writer ran")


@pytest.mark.parametrize("with_messages", [False, True])
def test_a_system_prompt_for_rows_without_messages_is_a_usage_error(tmp_path, capsys, with_messages):
    """Defect 2: --system-prompt given to `python -m gem_adapters.openrlhf` or rl2 (rows without messages) was dropped
    silently (exit 0), while their make_dataset() refuses it; the rows with messages still hold it."""
    out = tmp_path / "train.jsonl"
    argv = [*ENV, "--n", "2", "--out", str(out), "--system-prompt", "Be careful."]
    if with_messages:
        kept = []

        def keep(rows, args):
            kept.extend(rows)
            open(args.out, "w").close()
            return "2 rows"

        run_dataset_cli("python -m fw", "Rows.", keep, argv, with_messages=True)
        assert all(row.messages[0] == {"role": "system", "content": "Be careful."} for row in kept) and len(kept) == 2
        return
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", _never, argv, with_messages=False)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and "--system-prompt" in err and "training" in err, err
    assert list(tmp_path.iterdir()) == []


def test_sigterm_while_the_file_is_written_leaves_no_temporary_file(tmp_path):
    """Defect 6: SIGTERM (a scheduler's stop, `timeout`, `kill`) mid-write left the hidden .NAME.PID.RAND.partial.SUFFIX
    in the output folder for good: only Ctrl-C's KeyboardInterrupt made atomic_path remove it. The child signals itself
    while its writer holds the half-written temporary."""
    out = tmp_path / "train.jsonl"
    child = textwrap.dedent(f"""
        import os, signal, time
        from gem_core.cli.dataset import run_dataset_cli
        def write_then_terminated(rows, args):
            with open(args.out, "w") as f:
                f.write('{{"half": ')
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(20)  # the signal ends the command before this does
            return "never"
        run_dataset_cli("python -m fw", "Rows.", write_then_terminated, ["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", {str(out)!r}],
                        with_messages=False)
    """)
    ended = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert list(tmp_path.iterdir()) == [], ended.stderr
    assert ended.returncode == 128 + signal.SIGTERM and ended.stderr == f"interrupted: nothing written to {out}\n", ended.stderr


@pytest.mark.parametrize("where", ["folder", "under a file"])
def test_an_out_that_can_never_be_written_is_refused_before_any_row_is_built(tmp_path, capsys, monkeypatch, where):
    """Defect 7: --out naming an existing folder, or a path under a regular file, was found only after every row was
    built (minutes for a large dataset), and ended with exit 1 ("File exists" for a path under a file) instead of a
    usage error naming --out."""
    import gem_core.cli.dataset as dataset

    def no_rows(*args, **kwargs):
        raise AssertionError("rows were built for an --out that can never be written")

    monkeypatch.setattr(dataset, "episode_rows", no_rows)
    (tmp_path / "notes.txt").write_text("")
    out = tmp_path if where == "folder" else tmp_path / "notes.txt" / "train.jsonl"
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", _never, [*ENV, "--n", "2", "--out", str(out)])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and "--out" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_out_that_is_a_device_is_still_written_through(capsys):
    """/dev/null's folder is not writable by a user: the check must not refuse a device the writer writes through."""
    run_dataset_cli("python -m fw", "Rows.", lambda rows, args: f"{len(rows)} rows", [*ENV, "--n", "1", "--out", os.devnull],
                    with_messages=False)
    assert capsys.readouterr().out == f"wrote 1 rows to {os.devnull}\n"


def test_trl_writes_parquet_whatever_the_case_of_the_suffix(tmp_path):
    """Defect 8: `python -m gem_adapters.trl --out train.PARQUET` wrote JSON lines into a file named parquet (exit 0),
    which load_dataset('parquet', ...) then fails to read."""
    pytest.importorskip("datasets")
    from gem_adapters.trl.__main__ import main

    out = tmp_path / "train.PARQUET"
    main([*ENV, "--n", "2", "--out", str(out)])
    assert out.read_bytes()[:4] == b"PAR1"


def test_bad_env_kwargs_under_a_lazily_building_placement_are_a_usage_error(tmp_path, capsys, monkeypatch):
    """Defect 1 at the command line: under GEM_ENV_BACKEND=ray `python -m gem_adapters.openrlhf --env-kwargs '{"bogus": 1}'`
    exited 0 with a dataset whose every episode fails in training. The Ray placement (which builds the env only at its
    first reset, in an actor) is replaced here by a stand-in that builds nothing, as RayEnv does: the core env has no Ray."""
    placed = []

    class Lazy:
        def close(self) -> None:
            pass

    def make_env(env_id, env_backend=None, **env_kwargs):
        placed.append(env_kwargs)
        return Lazy()

    monkeypatch.setenv("GEM_ENV_BACKEND", "ray")
    monkeypatch.setattr(placement, "make_env", make_env)
    out = tmp_path / "train.jsonl"
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", _never, [*ENV, "--n", "2", "--out", str(out), "--env-kwargs", '{"bogus": 1}'],
                        with_messages=False)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and "--env-kwargs" in err and "bogus" in err, err
    assert placed == [] and list(tmp_path.iterdir()) == []
