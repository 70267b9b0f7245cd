"""Every env id upstream GEM registers (github.com/axon-rl/gem at commit 4069f2f, gem/envs/__init__.py)
resolves here, and each either builds offline or fails with one error that names what is missing: the
hub dataset (and how to point the env at a local copy), or for WebShop the catalogue it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gem_core import list_envs, registry

UPSTREAM_NON_RG_IDS = (
    "game:GuessTheNumber-v0-hard",
    "game:GuessTheNumber-v0-easy",
    "game:GuessTheNumber-v0-random",
    "game:Mastermind-v0-hard",
    "game:Mastermind-v0-random",
    "game:Mastermind-v0-easy",
    "game:Minesweeper-v0-easy",
    "game:Minesweeper-v0-hard",
    "game:Minesweeper-v0-random",
    "game:Wordle-v0-hard",
    "game:Wordle-v0-easy",
    "game:Wordle-v0-random",
    "game:FifteenPuzzle-v0-random",
    "game:FifteenPuzzle-v0-easy",
    "game:FifteenPuzzle-v0-hard",
    "game:Hangman-v0-random",
    "game:Hangman-v0-easy",
    "game:Hangman-v0-hard",
    "game:Sudoku-v0-easy",
    "game:Sudoku-v0-hard",
    "game:Sudoku-v0-random",
    "game:TowerofHanoi-v0-easy",
    "game:TowerofHanoi-v0-hard",
    "game:TowerofHanoi-v0-random",
    "game:Game2048-v0-easy",
    "game:Game2048-v0-hard",
    "game:Game2048-v0-extreme-hard",
    "game:Game2048-v0-random",
    "game:Sokoban-v0-easy",
    "game:Sokoban-v0-hard",
    "game:Sokoban-v0-random",
    "game:Crosswords-v0-easy",
    "game:Crosswords-v0-hard",
    "game:Crosswords-v0-random",
    "game:WordSearch-v0-easy",
    "game:WordSearch-v0-hard",
    "game:WordSearch-v0-random",
    "game:WikiGame-v0-easy",
    "game:WikiGame-v0-hard",
    "math:ASDiv2K",
    "math:GSM8K",
    "math:Math12K",
    "math:Math8K-3to5",
    "math:Orz57K",
    "math:DeepScaleR40K",
    "math:Geometry3K",
    "code:CodeContest",
    "code:Taco8k",
    "code:PrimeIntellect15k",
    "logic:RuleTaker-d0",
    "logic:RuleTaker-d1",
    "logic:RuleTaker-d2",
    "logic:RuleTaker-d3",
    "logic:RuleTaker-d5",
    "qa:NaturalQuestions",
    "qa:HotpotQA",
    "eval:MATH500",
    "eval:AMC",
    "eval:OlympiadBench",
    "eval:Minerva",
    "eval:AIME24",
    "eval:CodeContest",
    "eval:QaOpen",
    "eval:2Wiki",
    "eval:PopQA",
    "eval:TriviaQA",
    "eval:HotpotQA",
    "eval:Bamboogle",
    "eval:NaturalQuestions",
    "eval:Musique",
    "webshop:train-html",
    "webshop:test-html",
    "webshop:train-text",
    "webshop:test-text",
    "webshop:train-text_rich",
    "webshop:test-text_rich",
)
# reasoning-gym 0.1.23's datasets (upstream pins that version; it registers one rg: id each).
UPSTREAM_RG_DATASETS = (
    "ab", "acre", "advanced_geometry", "aiw", "arc_1d", "arc_agi", "base_conversion", "basic_arithmetic", "bf",
    "binary_alternation", "binary_matrix", "bitwise_arithmetic", "boxnet", "caesar_cipher", "calendar_arithmetic",
    "chain_sum", "circuit_logic", "codeio", "color_cube_rotation", "complex_arithmetic", "composite", "count_bits",
    "count_primes", "countdown", "course_schedule", "cryptarithm", "decimal_arithmetic", "decimal_chain_sum",
    "dice", "emoji_mystery", "family_relationships", "figlet_font", "fraction_simplification", "futoshiki",
    "game_of_life", "game_of_life_halting", "gcd", "graph_color", "group_anagrams", "gsm_symbolic",
    "intermediate_integration", "isomorphic_strings", "jugs", "kakurasu", "knight_swap", "knights_knaves",
    "largest_island", "lcm", "leg_counting", "letter_counting", "letter_jumble", "list_functions", "mahjong_puzzle",
    "manipulate_matrix", "maze", "mini_sudoku", "modulo_grid", "n_queens", "needle_haystack", "number_filtering",
    "number_format", "number_sequence", "number_sorting", "palindrome_generation", "palindrome_partitioning",
    "polynomial_equations", "polynomial_multiplication", "pool_matrix", "power_function", "prime_factorization",
    "products", "propositional_logic", "puzzle24", "quantum_lock", "ransom_note", "rearc", "rectangle_count",
    "rotate_matrix", "rotten_oranges", "rubiks_cube", "rush_hour", "self_reference", "sentence_reordering",
    "shortest_path", "simple_equations", "simple_geometry", "simple_integration", "sokoban", "spell_backward",
    "spiral_matrix", "string_insertion", "string_manipulation", "string_splitting", "string_synthesis", "sudoku",
    "survo", "syllogism", "time_intervals", "tower_of_hanoi", "tsumego", "word_ladder", "word_sequence_reversal",
    "word_sorting", "zebra_puzzles"
)

UPSTREAM_IDS = UPSTREAM_NON_RG_IDS + tuple(f"rg:{name}" for name in UPSTREAM_RG_DATASETS)

# Builds every upstream id with the hub unreachable (datasets' offline mode, so nothing leaves the machine)
# and reports, per id, what happened: built from what ships, or the error that stopped it.
OFFLINE_PROBE = r"""
import json, sys
from gem_core import registry
out = {}
for env_id in json.loads(sys.stdin.read()):
    env_spec = registry.spec(env_id)
    report = {"sample": None}
    try:
        env = registry.make(env_id)
        env.reset(seed=0)
        report["outcome"] = "built"
    except Exception as exc:
        report["outcome"], report["error"] = type(exc).__name__, str(exc)
    if env_spec.sample_kwargs:
        env = registry.make(env_id, **env_spec.sample_kwargs)
        report["sample"] = bool(env.reset(seed=0)[0])
    report["dataset"] = env_spec.kwargs.get("dataset_path")
    out[env_id] = report
print("\nREPORT " + json.dumps(out))  # on its own line: some envs print progress dots
"""


def test_upstream_registers_180_distinct_ids():
    assert len(UPSTREAM_IDS) == 180 == len(set(UPSTREAM_IDS))


@pytest.mark.parametrize("env_id", UPSTREAM_IDS)
def test_upstream_id_resolves(env_id):
    assert registry.spec(env_id).entry_point


def test_unshipped_upstream_ids_are_not_listed_as_buildable():
    listed = set(list_envs())
    assert set(registry.UPSTREAM_UNAVAILABLE) & listed == set()
    assert set(registry.UPSTREAM_UNAVAILABLE) <= set(UPSTREAM_IDS)


@pytest.fixture(scope="module")
def offline_reports() -> dict[str, dict]:
    pytest.importorskip("datasets")
    ids = [env_id for env_id in UPSTREAM_IDS if not env_id.startswith("rg:")]
    try:
        import reasoning_gym  # noqa: F401

        ids = list(UPSTREAM_IDS)
    except ImportError:  # the rg extra is not installed: rg ids still resolve (test above)
        pass
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_PROBE], input=json.dumps(ids), capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (report,) = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    return json.loads(report[len("REPORT "):])


@pytest.mark.parametrize("env_id", UPSTREAM_IDS)
def test_upstream_id_builds_offline_or_names_what_is_missing(env_id, offline_reports):
    if env_id not in offline_reports:
        pytest.skip("reasoning-gym is not installed")
    report = offline_reports[env_id]
    if env_id in registry.UPSTREAM_UNAVAILABLE:
        assert report["outcome"] == "EnvUnavailableError"
        assert env_id in report["error"] and "catalogue" in report["error"]
    elif report["dataset"]:
        # A dataset env: the hub copy may be in the local cache; if not, the error names it and the fix,
        # and the shipped sample builds it offline either way.
        if report["outcome"] != "built":
            assert report["outcome"] == "DatasetUnavailableError", report
            assert repr(report["dataset"]) in report["error"] and "data_files=" in report["error"]
        assert report["sample"] is True
    else:
        assert report["outcome"] == "built", report
