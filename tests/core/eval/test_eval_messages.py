"""`gem eval` messages a user hit: Ctrl-C before anything was written, the resume hint being a command that
works, --model naming a folder that holds no model, --out naming a file."""

from __future__ import annotations

import json
import os
import shlex
import signal

import pytest
from openai_test_server import OpenAITestServer

from gem_core.eval import runner
from gem_core.eval.cli import main
from gem_core.eval.policy_backend import PolicyBackend

EASY = "game:GuessTheNumber-v0-easy"
FAST = ["--episodes", "2", "--max-turns", "1", "--max-new-tokens", "2", "--concurrency", "1", "--no-progress", "--no-plots"]


def _stderr_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", [
    "model_load",  # what Ctrl-C raises while transformers loads the model
    "imports",  # while rich, torch or transformers import: `python -m gem_core.eval` has no `gem` command around it
])
def test_ctrl_c_before_the_run_starts_says_nothing_was_written_and_gives_no_resume_hint(tmp_path, monkeypatch, capsys, where):
    from gem_core.eval import cli

    if where == "model_load":
        monkeypatch.setattr(PolicyBackend, "from_pretrained", _interrupted)
    else:
        monkeypatch.setattr(cli, "missing_modules", _interrupted)
    out = tmp_path / "x"
    assert main(["--model", "runs/trl/model", "--env", "game:Wordle-v0", *FAST, "--out", str(out)]) == 130
    assert _stderr_line(capsys) == (
        f"Interrupted (SIGINT) before the run started: nothing was written to {out}, so there is nothing to "
        "resume; run the same command again to start it.")
    assert not out.exists()


def _interrupt_the_first_episode(monkeypatch):
    """SIGINT as the first episode starts: the run is stopped with its run.json written and no episode done."""
    make_env = runner.placement.make_env

    def make_env_then_ctrl_c(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return make_env(*args, **kwargs)

    monkeypatch.setattr(runner.placement, "make_env", make_env_then_ctrl_c)


def _hint(err: str, out) -> list[str]:
    """The resume command the last line of ``err`` gives (lines before it are transformers' loading bar)."""
    prefix = f"Interrupted (SIGINT): the partial report is in {out}/report.json; continue with: "
    assert "Traceback" not in err, err
    err = err.rstrip("\n").split("\n")[-1]
    assert err.startswith(prefix), err
    argv = shlex.split(err[len(prefix):])
    assert argv[:4] == ["gem", "eval", "--resume", str(out)], argv
    return argv[2:]


def test_the_resume_hint_of_an_in_process_run_names_its_model_and_works(tmp_path, tiny_model_dir, monkeypatch, capsys):
    out = tmp_path / "run"
    _interrupt_the_first_episode(monkeypatch)
    assert main(["--model", str(tiny_model_dir), "--env", EASY, *FAST, "--out", str(out)]) == 130
    resume = _hint(capsys.readouterr().err, out)
    assert resume == ["--resume", str(out), "--model", str(tiny_model_dir)]
    monkeypatch.undo()
    assert main([*resume, "--no-progress", "--no-plots"]) == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert [e["seed"] for e in report["envs"][EASY]["episodes"]] == [0, 1]


def test_the_resume_hint_of_an_http_run_names_its_base_url_and_works(tmp_path, binary_search, monkeypatch, capsys):
    out = tmp_path / "run"
    with OpenAITestServer(respond=lambda messages: binary_search("\n".join(m["content"] for m in messages))) as server:
        _interrupt_the_first_episode(monkeypatch)
        assert main(["--model", "m", "--base-url", server.base_url, "--env", EASY, *FAST, "--out", str(out)]) == 130
        resume = _hint(capsys.readouterr().err, out)
        assert resume == ["--resume", str(out), "--base-url", server.base_url]
        monkeypatch.undo()
        assert main([*resume, "--no-progress", "--no-plots"]) == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert [e["seed"] for e in report["envs"][EASY]["episodes"]] == [0, 1]


def test_a_folder_without_config_json_is_not_a_model_folder_one_line_before_loading(tmp_path, monkeypatch, capsys):
    def load(*args, **kwargs):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(PolicyBackend, "from_pretrained", load)
    folder = tmp_path / "trl"
    (folder / "checkpoint").mkdir(parents=True)
    (folder / "model").mkdir()
    (folder / "model" / "config.json").write_text("{}")
    out = tmp_path / "out"
    assert main(["--model", str(folder), "--env", "game:Wordle-v0", *FAST, "--out", str(out)]) == 2
    assert _stderr_line(capsys) == (
        f"gem eval: --model {folder} is not a model folder (no config.json): a model folder, as save_pretrained "
        "writes it, holds config.json, the weights (*.safetensors) and the tokenizer files (tokenizer.json, "
        f"tokenizer_config.json); {folder / 'model'} is one. Give a model folder or a hub id.")
    bare = tmp_path / "bare"
    bare.mkdir()
    assert main(["--model", str(bare), "--env", "game:Wordle-v0", *FAST, "--out", str(out)]) == 2
    assert _stderr_line(capsys) == (
        f"gem eval: --model {bare} is not a model folder (no config.json): a model folder, as save_pretrained "
        "writes it, holds config.json, the weights (*.safetensors) and the tokenizer files (tokenizer.json, "
        "tokenizer_config.json). Give a model folder or a hub id.")
    assert not out.exists()


@pytest.mark.parametrize("below", [False, True])
def test_out_naming_a_file_is_one_line_naming_out_and_the_fix(tmp_path, capsys, below):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    out = a_file / "run" if below else a_file
    assert main(["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--env", EASY, *FAST, "--out", str(out)]) == 2
    where = f"{out}: {a_file}" if below else f"{out}"
    assert _stderr_line(capsys) == (
        f"gem eval: --out {where} is a file, not a folder; give the path of a folder (a new one is created) for the "
        "run's files.")
    assert a_file.read_text() == "keep me"


def test_a_base_url_that_is_not_http_names_the_flag(tmp_path, capsys):
    assert main(["--model", "m", "--base-url", "ftp://x", "--env", EASY, *FAST, "--out", str(tmp_path / "x")]) == 2
    assert _stderr_line(capsys).startswith("gem eval: --base-url must be an http:// or https:// URL")
