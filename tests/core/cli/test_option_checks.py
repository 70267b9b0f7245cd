"""gem_core.cli.options' shared checks: folder_problem and the OneLineErrors parser the examples use."""

from __future__ import annotations

import argparse

import pytest

from gem_core.cli.options import OneLineErrors, folder_problem


class Parser(OneLineErrors, argparse.ArgumentParser):
    pass


def test_folder_problem_names_the_file_in_the_way(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    assert folder_problem(tmp_path / "new" / "deeper") is None and folder_problem(tmp_path) is None
    assert folder_problem(a_file) == f"{a_file} is a file, not a folder"
    assert folder_problem(a_file / "sub") == f"{a_file / 'sub'}: {a_file} is a file, not a folder"


@pytest.mark.parametrize(
    ("check", "line"),
    [
        (lambda p, f: p.require_counts({"--n": 3, "--gpus": 0}), "prog: error: --gpus must be at least 1, got 0"),
        (lambda p, f: p.require_env("game:Wordel-v0"), "prog: error: --env: No env registered as 'game:Wordel-v0'"),
        (lambda p, f: p.require_folder("--out", f), "prog: error: --out {f} is a file, not a folder: give a folder path"),
        (lambda p, f: p.parse_args(["--nope"]), "prog: error: unrecognized arguments: --nope (--help lists the options)"),
    ],
)
def test_a_failed_check_is_one_line_naming_the_option_and_exit_2(tmp_path, capsys, check, line):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    with pytest.raises(SystemExit) as ended:
        check(Parser(prog="prog"), a_file)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and err.startswith(line.format(f=a_file)), err


def test_checks_that_hold_say_nothing(tmp_path, capsys):
    parser = Parser(prog="prog")
    parser.require_counts({"--n": 1})
    parser.require_env("game:Wordle-v0")
    parser.require_folder("--out", tmp_path / "new")
    assert capsys.readouterr().err == ""
