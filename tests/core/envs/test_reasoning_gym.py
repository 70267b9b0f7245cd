"""rg:<name> envs: the id list matches reasoning-gym's registry, every id builds offline, and an answer
taken from the dataset itself scores 1."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import deque

import pytest

reasoning_gym = pytest.importorskip("reasoning_gym")

from gem_core.envs.reasoning_gym.dataset_names import DATASET_NAMES  # noqa: E402
from gem_core.envs.reasoning_gym.env import ReasoningGymEnv  # noqa: E402
from gem_core.envs.reasoning_gym.refresh_names import library_dataset_names  # noqa: E402
from gem_core.registry import list_envs, make  # noqa: E402

import gem_core.envs.reasoning_gym  # noqa: E402,F401  (registers the ids)

# Datasets whose entries carry no answer (many are valid): where the reference answer is instead.
METADATA_ANSWER = {
    "graph_color": "possible_answer",
    "propositional_logic": "example_answer",
    "rubiks_cube": "example_correct_answer",
}


def solve_rush_hour(board_config: str) -> str:
    """Breadth-first search over single-step moves with reasoning-gym's own board."""
    from reasoning_gym.games.rush_hour import Board

    start = Board(board_config)
    pieces = [chr(ord("A") + i) for i in range(len(start._pieces))]
    queue, seen = deque([(start, [])]), {str(start)}
    while queue:
        board, moves = queue.popleft()
        if board.solved:
            return " ".join(moves)
        for piece in pieces:
            for step in (1, -1):
                nxt = copy.deepcopy(board)
                nxt.move(piece, step)
                key = str(nxt)
                if key not in seen:
                    seen.add(key)
                    queue.append((nxt, moves + [f"{piece}{'+' if step > 0 else '-'}1"]))
    raise AssertionError("unsolvable board")


def plan_boxnet(initial_state: dict[str, list[str]]) -> str:
    """Move each box square by square to its target, one action per step (a valid, slow plan)."""
    steps = []
    for square, items in initial_state.items():
        for box in (item for item in items if item.startswith("box_")):
            colour = box[4:]
            target = next(sq for sq, its in initial_state.items() if f"target_{colour}" in its)
            x, y = map(float, square.split("_"))
            tx, ty = map(float, target.split("_"))
            while (x, y) != (tx, ty):
                nx, ny = (x + (1 if tx > x else -1), y) if x != tx else (x, y + (1 if ty > y else -1))
                steps.append({f"Agent[{x}, {y}]": f"move({box}, square[{nx}, {ny}])"})
                x, y = nx, ny
            steps.append({f"Agent[{x}, {y}]": f"move({box}, target_{colour})"})
    return json.dumps(steps)


def reference_answer(env: ReasoningGymEnv) -> str:
    entry = env.entry
    if entry["answer"] is not None:
        return str(entry["answer"])
    if env.name in METADATA_ANSWER:
        ref = entry["metadata"][METADATA_ANSWER[env.name]]
        return ref if isinstance(ref, str) else json.dumps({str(k): v for k, v in ref.items()})
    if env.name == "rush_hour":
        return solve_rush_hour(entry["metadata"]["board_config"])
    if env.name == "boxnet":
        return plan_boxnet(entry["metadata"]["initial_state"])
    raise AssertionError(f"{env.name}: no reference answer; add one to this test")


def test_shipped_id_list_matches_the_installed_library():
    assert list(DATASET_NAMES) == library_dataset_names(), (
        "reasoning-gym's registry changed: run `python -m gem_core.envs.reasoning_gym.refresh_names`"
    )
    assert list_envs("rg:*") == [f"rg:{name}" for name in DATASET_NAMES]


def test_registering_the_ids_does_not_import_reasoning_gym():
    code = "import sys, gem_core.envs.reasoning_gym; print('reasoning_gym' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


SMALL_CONFIGS = {"rush_hour": {"min_moves": 1, "max_moves": 4}}


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_every_dataset_builds_offline_and_its_own_answer_scores_one(name):
    overrides = {"config": SMALL_CONFIGS[name]} if name in SMALL_CONFIGS else {}
    env = make(f"rg:{name}", **overrides)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs and info["dataset"] == name
    gold = reference_answer(env)
    _, reward, terminated, _, info = env.step(f"Let me think.\n<answer>{gold}</answer>")
    assert (reward, terminated, info["correct"]) == (1.0, True, True)


def test_wrong_and_missing_answers():
    env = make("rg:letter_counting")
    env.reset(seed=1)
    wrong = str(int(env.entry["answer"]) + 1)
    assert env.step(f"<answer>{wrong}</answer>")[1] == 0.0
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step(env.entry["answer"])  # no tags
    assert reward == env.format_penalty and terminated and info["format_error"]


def test_reset_is_deterministic_in_the_seed():
    env = make("rg:basic_arithmetic")
    assert [env.reset(seed=s)[0] for s in range(10)] == [env.reset(seed=s)[0] for s in range(10)]
    assert len({env.reset(seed=s)[0] for s in range(10)}) > 5


def test_envs_share_one_generated_dataset():
    assert make("rg:chain_sum").dataset is make("rg:chain_sum").dataset


@pytest.mark.parametrize("action", ["", "<answer></answer>", "<answer>\x00{}}}</answer>", "\\boxed{", "<answer>" + "9" * 5000 + "</answer>"])
def test_step_never_raises_on_hostile_text(action):
    for name in ("rg:basic_arithmetic", "rg:sudoku", "rg:boxnet", "rg:rush_hour"):
        env = make(name)
        env.reset(seed=0)
        obs, reward, terminated, _, _ = env.step(action)
        assert isinstance(obs, str) and terminated and reward <= 1.0
        env.reset(seed=0)
        assert isinstance(env.sample_random_action(), str)


def codeio_index_running(dataset, needle: str) -> int:
    """An item of reasoning-gym's CodeI/O dataset whose programs (run to make the item) contain ``needle``."""
    import random

    data = type(dataset)._jsonl_data
    sample = next(d for d in data if needle in d["input_generator"] + d["code_sample"])
    return next(i for i in range(100_000) if random.Random(dataset.seed + i).choice(data) is sample)


def test_codeio_runs_its_datasets_programs_outside_this_process_and_directory(tmp_path, monkeypatch):
    """reasoning-gym's CodeI/O exec()s a program from its data to make each item; one writes
    ``temp_parameters.txt`` into the working directory (the file the suite used to leave behind)."""
    monkeypatch.chdir(tmp_path)
    env = make("rg:codeio")
    index = codeio_index_running(env.dataset, '"temp_parameters.txt"')
    obs, info = env.reset(options={"index": index})
    assert info["index"] == index and env.entry["question"] in obs
    assert list(tmp_path.iterdir()) == [], "CodeI/O's program wrote into the trainer's working directory"
    gold = reference_answer(env)
    assert env.step(f"<answer>{gold}</answer>")[1] == 1.0


def test_a_composite_makes_items_in_a_worker_only_when_it_mixes_codeio(monkeypatch):
    from reasoning_gym.code.codeio import CodeIODataset

    def refuse(*args, **kwargs):
        raise AssertionError("CodeI/O ran a program from its data in the trainer's process")

    monkeypatch.setattr(CodeIODataset, "_generate_io_pair", refuse)  # this process only; the worker is its own
    mixed = make("rg:composite", config={"datasets": [{"name": "codeio", "weight": 1.0, "config": {}}]})
    obs, _ = mixed.reset(seed=3)
    assert mixed.entry["metadata"]["source_dataset"] == "codeio" and mixed.entry["question"] in obs
    default = make("rg:composite")
    assert "codeio" not in {spec.name for spec in default.dataset.config.datasets}


#: Datasets whose items reasoning-gym made by iterating a set (of strings, or SymPy's terms): the same seed gave
#: another question or gold answer under another PYTHONHASHSEED (found by making every dataset's items under
#: several), with the items where it showed.
HASH_SEEDED_ITEMS = {
    "rg:intermediate_integration": [21, 22],
    **{env_id: [0, 1, 2] for env_id in ("rg:isomorphic_strings", "rg:knight_swap", "rg:polynomial_multiplication", "rg:ransom_note", "rg:word_ladder")},
}

_EPISODES_BY_HASH_SEED = r"""
import json, sys
from gem_core import make
out = {}
for env_id, indexes in json.loads(sys.argv[1]).items():
    env = make(env_id)
    for index in indexes:
        observation, _ = env.reset(options={"index": index})
        out[f"{env_id} item {index}"] = [observation, repr(env.unwrapped.entry["answer"])]
    env.close()
print(json.dumps(out))
"""


def test_an_episode_is_the_same_under_every_hash_seed():
    """Processes with different PYTHONHASHSEED give the same first observation and gold for each item."""
    import os

    runs = []
    for hash_seed in ("1", "2", "3"):
        child = subprocess.run(
            [sys.executable, "-c", _EPISODES_BY_HASH_SEED, json.dumps(HASH_SEEDED_ITEMS)],
            capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert child.returncode == 0, child.stderr[-2000:]
        runs.append(json.loads(child.stdout.splitlines()[-1]))
    differ = sorted(key for key in runs[0] if not runs[0][key] == runs[1][key] == runs[2][key])
    assert differ == []


def test_the_hash_seeded_datasets_make_their_items_in_a_worker():
    from gem_core.envs.reasoning_gym.env import MADE_IN_WORKER

    assert {env_id.removeprefix("rg:") for env_id in HASH_SEEDED_ITEMS} <= MADE_IN_WORKER


def test_the_default_composite_mixes_only_datasets_made_in_this_process():
    """A composite naming a dataset made in a worker makes every item there; the default mix names none."""
    from gem_core.envs.reasoning_gym.env import MADE_IN_WORKER

    default = make("rg:composite")
    assert MADE_IN_WORKER.isdisjoint(spec.name for spec in default.dataset.config.datasets)
