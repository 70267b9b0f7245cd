"""gem_core.cli.dataset: the command line every adapter's dataset command (`python -m gem_adapters.<fw>`) shares."""

from __future__ import annotations

import argparse
import re

import pytest

from gem_core.cli.dataset import add_dataset_arguments, rows_from_arguments, run_dataset_cli
from gem_core.errors import InvalidArgument


def test_the_shared_command_line_reports_bad_options_in_one_line():
    parser = add_dataset_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", "x", "--env-kwargs", "[1]"])
    with pytest.raises(InvalidArgument, match="--env-kwargs must be a JSON object"):
        rows_from_arguments(args)
    args = parser.parse_args(["--env", "game:Nope-v0", "--n", "2", "--out", "x"])
    with pytest.raises(InvalidArgument, match="Nope"):
        rows_from_arguments(args)
    args = parser.parse_args(["--env", "game:GuessTheNumber-v0", "--env", "game:Wordle-v0", "--n", "1", "--out", "x", "--seed-start", "9"])
    assert [(r.label.env_id, r.label.seed) for r in rows_from_arguments(args, with_messages=False)] == [
        ("game:GuessTheNumber-v0", 9),
        ("game:Wordle-v0", 9),
    ]


def test_the_shared_command_line_takes_weights_and_refuses_a_bad_one_in_one_line():
    parser = add_dataset_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--env", "game:GuessTheNumber-v0:3", "--env", "game:Wordle-v0", "--n", "400", "--out", "x"])
    rows = rows_from_arguments(args, with_messages=False)
    assert len(rows) == 400  # a weighted mixture: --n rows in all
    share = sum(r.label.env_id == "game:GuessTheNumber-v0" for r in rows) / len(rows)
    assert abs(share - 0.75) < 4 * (0.75 * 0.25 / 400) ** 0.5
    for bad, message in [("game:Wordle-v0:-1", "finite numbers above zero"), ("game:Wordle-v0:x", "is not a number"),
                         ("game:Wordel-v0:1", "--env: No env registered as 'game:Wordel-v0'")]:
        args = parser.parse_args(["--env", bad, "--n", "2", "--out", "x"])
        with pytest.raises(InvalidArgument, match=message):
            rows_from_arguments(args)


def test_the_dataset_command_writes_through_the_adapter_and_says_what_it_wrote(tmp_path, capsys):
    written = []

    def write_rows(rows, args):
        written.append(([(r.label.env_id, r.label.seed, r.messages) for r in rows], args.agent_name))
        with open(args.out, "w") as f:
            f.write("rows\n")
        return f"{len(rows)} rows"

    out = str(tmp_path / "x.jsonl")
    run_dataset_cli("python -m fw", "Rows.", write_rows, ["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", out, "--agent-name", "a"],
                    with_messages=False, add_arguments=lambda parser: parser.add_argument("--agent-name", default="gem_env"))
    assert written == [([("game:GuessTheNumber-v0", 0, None), ("game:GuessTheNumber-v0", 1, None)], "a")]
    assert capsys.readouterr().out == f"wrote 2 rows to {out}\n" and open(out).read() == "rows\n"
    with pytest.raises(SystemExit) as ended:  # a bad option ends the command before the adapter writes anything
        run_dataset_cli("python -m fw", "Rows.", write_rows, ["--env", "game:Nope-v0", "--n", "2", "--out", out])
    assert ended.value.code == 2 and "Nope" in capsys.readouterr().err
    assert len(written) == 1


def test_a_write_that_fails_leaves_no_file_and_ends_in_one_line_naming_the_path(tmp_path):
    """A full disk (or an unwritable folder) halfway through: the command says so in one line, and neither
    a half-written file nor its temporary is left where the trainer would read it."""
    import errno

    def write_half_then_fail(rows, args):
        with open(args.out, "w") as f:
            f.write('{"half": ')
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "train.parquet"
    with pytest.raises(SystemExit, match=rf"Cannot write {out}: No space left on device"):
        run_dataset_cli("python -m fw", "Rows.", write_half_then_fail, ["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out)])
    assert list(tmp_path.iterdir()) == []


def test_the_file_appears_whole_under_its_name_and_the_writer_sees_its_suffix(tmp_path):
    seen = []

    def write_rows(rows, args):
        seen.append(args.out)
        with open(args.out, "w") as f:
            f.write("rows\n")
        return "1 row"

    out = tmp_path / "old.parquet"
    out.write_text("the previous dataset\n")
    run_dataset_cli("python -m fw", "Rows.", write_rows, ["--env", "game:GuessTheNumber-v0", "--n", "1", "--out", str(out)])
    assert seen[0].endswith(".parquet") and seen[0] != str(out)  # written beside it, renamed when whole
    assert out.read_text() == "rows\n" and list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize("with_messages", [True, False])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--env-kwargs", '{"foo": 1}'], r"^python -m fw: error: --env-kwargs \{\"foo\": 1\} do not fit game:GuessTheNumber-v0 \(.*unexpected keyword argument 'foo'.*\); its registered kwargs are"),
        (["--env-kwargs", '{"max_number": -3}'], r"^python -m fw: error: --env-kwargs \{\"max_number\": -3\} do not fit game:GuessTheNumber-v0 \(.*max_number.*\)"),
        (["--seed-start", "-5"], r"^python -m fw: error: --seed-start must be 0 or more \(gymnasium seeds are non-negative\), got -5"),
    ],
)
def test_kwargs_the_env_refuses_and_a_negative_seed_end_in_one_line_naming_the_option(tmp_path, capsys, options, message, with_messages):
    """Every adapter's command, whether its rows hold the first observation (TRL, verl) or only the label
    (OpenRLHF, RL2): a dataset whose episodes cannot start is refused here, not on the GPU at training time."""
    out = tmp_path / "x.jsonl"
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", lambda rows, args: "never", ["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out), *options],
                        with_messages=with_messages)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and re.search(message, err) and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_ends_the_command_in_one_line_with_nothing_written(tmp_path, capsys):
    def interrupted(rows, args):
        with open(args.out, "w") as f:
            f.write('{"half": ')
        raise KeyboardInterrupt

    out = tmp_path / "x.jsonl"
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", interrupted, ["--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out)])
    assert ended.value.code == 130
    assert capsys.readouterr().err == f"interrupted: nothing written to {out}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_remote_env_without_the_serve_extra_is_one_line_with_the_install_command(monkeypatch, tmp_path):
    """No httpx (a TRL-only install): a remote id says which extra to install, as the README's Errors paragraph promises."""
    import sys

    from gem_core.errors import DependencyNotInstalled
    from gem_core.registry import make

    monkeypatch.setitem(sys.modules, "httpx", None)  # `import httpx` raises ImportError
    remote = "remote:http://127.0.0.1:9/game:GuessTheNumber-v0"
    with pytest.raises(DependencyNotInstalled, match=r'remote: envs need httpx: pip install -e "\.\[serve\]"'):
        make(remote)
    with pytest.raises(SystemExit, match=r'^remote: envs need httpx: pip install -e "\.\[serve\]"'):
        run_dataset_cli("python -m fw", "Rows.", lambda rows, args: "never", ["--env", remote, "--n", "1", "--out", str(tmp_path / "x.jsonl")],
                        with_messages=False)


@pytest.mark.parametrize(("envs", "n", "total"), [
    (["game:GuessTheNumber-v0"], 100_000_000, 100_000_000),  # grew to 7.7 GB
    (["game:GuessTheNumber-v0", "game:Wordle-v0"], 600_000, 1_200_000),  # bare ids: --n rows each
    (["game:GuessTheNumber-v0:1", "game:Wordle-v0:1"], 1_000_001, 1_000_001),  # a mixture: --n in all
])
def test_n_past_the_row_bound_ends_in_one_line_before_any_row_is_built(tmp_path, monkeypatch, capsys, envs, n, total):
    import gem_core.cli.dataset as dataset

    def no_rows(*args, **kwargs):
        raise AssertionError(f"rows were built for --n {n}, over the bound")
        yield  # pragma: no cover

    monkeypatch.setattr(dataset, "episode_rows", no_rows)
    options = [arg for env in envs for arg in ("--env", env)]
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", lambda rows, args: "never", [*options, "--n", str(n), "--out", str(tmp_path / "x.jsonl")])
    message = capsys.readouterr().err
    assert ended.value.code == 2 and message.count("\n") == 1
    assert f"--n {n}" in message and f"{total} rows" in message and "--seed-start" in message
    assert list(tmp_path.iterdir()) == []


def test_n_at_the_row_bound_is_accepted(monkeypatch):
    import gem_core.cli.dataset as dataset

    monkeypatch.setattr(dataset, "episode_rows", lambda env_ids, n, **kwargs: iter([n]))
    args = add_dataset_arguments(argparse.ArgumentParser()).parse_args(["--env", "game:GuessTheNumber-v0", "--n", str(dataset.MAX_ROWS), "--out", "x"])
    assert rows_from_arguments(args) == [dataset.MAX_ROWS]


@pytest.mark.parametrize(("options", "message"), [
    (["--env", "game:GuessTheNumber-v0", "--n", "2", "--seed-start", "-1"], "--seed-start must be 0 or more"),
    (["--env", "game:Nope-v0", "--n", "2"], "--env: No env registered as 'game:Nope-v0'"),
    (["--env", "game:GuessTheNumber-v0", "--n", "0"], "--n must be at least 1, got 0"),
    (["--env", "game:GuessTheNumber-v0", "--n", "2", "--env-kwargs", "[1]"], "--env-kwargs must be a JSON object"),
    (["--env", "game:GuessTheNumber-v0", "--n", "abc"], "argument --n: invalid int value: 'abc'"),
])
def test_a_bad_option_is_a_usage_error_exit_2_in_one_line(tmp_path, capsys, options, message):
    """As `gem`'s own commands: a usage error exits 2 (not 1, the code of a run that failed) with one line, no usage."""
    with pytest.raises(SystemExit) as ended:
        run_dataset_cli("python -m fw", "Rows.", lambda rows, args: "never", [*options, "--out", str(tmp_path / "x.jsonl")])
    err = capsys.readouterr().err
    assert ended.value.code == 2
    assert err.startswith("python -m fw: error: ") and message in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
