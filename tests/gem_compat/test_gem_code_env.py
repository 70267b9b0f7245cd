"""GEM's ``CodeEnv(dataset=...)``: problems held in memory, as GEM's own code-env test passes them."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")

from gem.envs.code_env import CodeEnv, DatasetSplitError  # noqa: E402

ROW = {"problem": "Read two integers and print their sum.",
       "tests": json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})}


def test_an_in_memory_dataset_is_the_envs_problems() -> None:
    env = CodeEnv(dataset=datasets.Dataset.from_list([ROW]))
    observation, _ = env.reset(seed=0)
    assert "print their sum" in observation


def test_a_dataset_dict_with_several_splits_needs_split() -> None:
    both = datasets.DatasetDict({"a": datasets.Dataset.from_list([ROW]), "b": datasets.Dataset.from_list([ROW])})
    with pytest.raises(DatasetSplitError, match="split="):
        CodeEnv(dataset=both, split=None)
    assert "print their sum" in CodeEnv(dataset=both, split="b").reset(seed=0)[0]
