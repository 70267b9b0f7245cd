"""Every adapter's ``make_dataset`` has one shape: ``(env_ids, n, *, seed_start=0, env_kwargs=None,
system_prompt=None)``, so switching frameworks changes the import, not the call."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

#: oat has no make_dataset: its learner iterates empty prompts and the actor draws seeds itself.
ADAPTERS = ["trl", "verl", "openrlhf", "rl2"]
SHAPE = "(env_ids: 'str | Sequence[str] | Mapping[str, float]', n: 'int', *, seed_start: 'int' = 0, env_kwargs: 'Mapping[str, Any] | None' = None, system_prompt: 'str | None' = None)"
#: Old names still accepted for a while (with a FutureWarning), and when they go.
DEPRECATED: dict[str, set[str]] = {}


def _shape(adapter: str) -> str:
    function = importlib.import_module(f"gem_adapters.{adapter}.make_dataset").make_dataset
    signature = inspect.signature(function)
    kept = [p for name, p in signature.parameters.items() if name not in DEPRECATED.get(adapter, set())]
    return str(signature.replace(parameters=kept, return_annotation=inspect.Signature.empty))


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_every_adapter_builds_datasets_with_the_one_signature(adapter):
    assert _shape(adapter) == SHAPE


@pytest.mark.parametrize("adapter", ["openrlhf", "rl2"])
def test_rows_without_messages_refuse_a_system_prompt_naming_where_it_goes(adapter):
    make_dataset = importlib.import_module(f"gem_adapters.{adapter}.make_dataset").make_dataset
    with pytest.raises(ValueError, match="cannot hold a system prompt; set it in"):
        make_dataset("game:GuessTheNumber-v0", 1, system_prompt="Be brief.")
    assert len(make_dataset(["game:GuessTheNumber-v0"], 2, seed_start=5)) == 2


def test_verl_rows_take_the_default_agent_loop_entry():
    from gem_adapters.verl.make_dataset import DEFAULT_AGENT_NAME, make_dataset

    rows = make_dataset(["game:GuessTheNumber-v0"], 2, seed_start=7, system_prompt="Be brief.")
    assert [r["extra_info"]["seed"] for r in rows] == [7, 8] and {r["agent_name"] for r in rows} == {DEFAULT_AGENT_NAME}
    assert rows[0]["prompt"][0] == {"role": "system", "content": "Be brief."}


def test_rl2_does_not_import_openrlhf_for_its_rows():
    source = inspect.getsource(importlib.import_module("gem_adapters.rl2.make_dataset"))
    assert "gem_adapters.openrlhf" not in source


#: What each adapter's command needs installed to write its file, beyond the core.
WRITERS = {"trl": "datasets", "verl": "pyarrow", "openrlhf": None, "rl2": None}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_every_adapter_package_is_its_dataset_command_and_runs_without_a_runpy_warning(adapter, tmp_path):
    # A CLI module that the package's __init__ also imports makes runpy warn ("found in sys.modules"); __main__ is never imported.
    if WRITERS[adapter]:
        pytest.importorskip(WRITERS[adapter])
    out = tmp_path / ("train.parquet" if adapter == "verl" else "train.jsonl")
    command = [sys.executable, "-W", "error::RuntimeWarning", "-m", f"gem_adapters.{adapter}",
               "--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Warning" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.startswith("wrote 2 ") and out.exists()


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_old_dataset_command_fails_naming_the_new_one_instead_of_writing_nothing(adapter, tmp_path):
    out = tmp_path / "train.jsonl"
    command = [sys.executable, "-m", f"gem_adapters.{adapter}.make_dataset", "--env", "game:GuessTheNumber-v0", "--n", "2", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and f"python -m gem_adapters.{adapter}`" in done.stderr, done.stderr[-2000:]
    assert not out.exists()
