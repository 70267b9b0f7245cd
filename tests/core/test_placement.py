"""gem_core/placement.py: the one entry point that decides where an episode's env lives, and every path
that builds an env for an episode going through it (so ``GEM_ENV_BACKEND=ray`` moves them all)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from gem_core import placement
from gem_core.registry import make

ENV_ID = "game:GuessTheNumber-v0-easy"


class Placed(Exception):
    """Raised by the recording entry point: the path reached it (nothing else has to run)."""


def _record_placements(monkeypatch) -> list[tuple[str, dict]]:
    """Replace the entry point by one that records ``(env_id, env_kwargs)`` and stops the path there."""
    calls: list[tuple[str, dict]] = []

    def record(env_id, env_backend=None, **env_kwargs):
        calls.append((env_id, env_kwargs))
        raise Placed(env_id)

    monkeypatch.setattr(placement, "make_env", record)
    return calls


@pytest.fixture
def placed(monkeypatch):
    return _record_placements(monkeypatch)


def test_the_session_from_a_dataset_row_places_its_env(placed, tiny_tokenizer):
    from gem_core.rollout import EpisodeSession

    with pytest.raises(Placed):
        EpisodeSession.from_label({"env_id": ENV_ID, "seed": 3, "env_kwargs": {"max_turns": 2}}, tiny_tokenizer)
    assert placed == [(ENV_ID, {"max_turns": 2})]


def test_run_episodes_with_an_env_id_places_each_env(placed, tiny_tokenizer):
    from gem_core.rollout import run_episodes
    from gem_core.testing import ScriptedPolicy

    with pytest.raises(Placed):
        asyncio.run(run_episodes(ENV_ID, ScriptedPolicy(tiny_tokenizer, ["\\boxed{1}"]), tiny_tokenizer, [0]))
    assert placed == [(ENV_ID, {})]


def test_dataset_rows_with_first_observations_place_their_env(placed):
    from gem_core.rows import episode_rows

    with pytest.raises(Placed):
        list(episode_rows([ENV_ID], 2, env_kwargs={"max_turns": 3}, with_messages=True))
    assert placed == [(ENV_ID, {"max_turns": 3})]


def test_the_evaluation_runner_places_each_episodes_env(placed, tiny_tokenizer):
    from gem_core.eval import evaluate
    from gem_core.testing import ScriptedPolicy

    report = evaluate([ENV_ID], policy=ScriptedPolicy(tiny_tokenizer, ["\\boxed{1}"]), tokenizer=tiny_tokenizer, episodes=2, progress=False)
    assert [env_id for env_id, _ in placed] == [ENV_ID, ENV_ID]
    assert all("Placed" in record.error for record in report.episodes[ENV_ID])


def test_oats_actor_places_its_envs(placed, tiny_tokenizer):
    from gem_adapters.oat.actor import GemCollector

    collector = GemCollector()
    collector.args = SimpleNamespace(env_id=ENV_ID, num_env=2, rollout_batch_size_per_device=1)
    collector.tokenizer = tiny_tokenizer
    collector.sampling_params = SimpleNamespace(max_tokens=8, temperature=1.0, top_p=1.0)
    def generate(prompts, params):
        raise RuntimeError("the actor sampled with an env the entry point did not build")

    collector.generate = generate
    with pytest.raises(Placed):
        collector.collect_experience()
    assert placed and {env_id for env_id, _ in placed} == {ENV_ID}


def test_replaying_a_trajectory_file_places_its_env(placed, tmp_path):
    import json

    from gem_core.rollout.replay import replay_file

    record = {"format": "gem.trajectory/1", "prompt_ids": [1], "response_ids": [2], "loss_mask": [1], "logprobs": [0.0],
              "turn_spans": [[0, 1]], "rewards": [0.0], "terminated": True, "truncated": False, "seed": 0,
              "env_id": ENV_ID, "env_kwargs": {"max_turns": 2}, "actions": ["\\boxed{1}"]}
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(Placed):
        replay_file(str(path), None)
    assert placed == [(ENV_ID, {"max_turns": 2})]


def test_rescoring_an_eval_report_places_its_envs(monkeypatch, tiny_tokenizer):
    from gem_core.eval import evaluate
    from gem_core.eval.rescore import rescore_report
    from gem_core.testing import ScriptedPolicy

    report = evaluate([ENV_ID], policy=ScriptedPolicy(tiny_tokenizer, ["\\boxed{1}"]), tokenizer=tiny_tokenizer, episodes=1, progress=False)
    placed = _record_placements(monkeypatch)
    with pytest.raises(Placed):
        rescore_report(report)
    assert placed == [(ENV_ID, {})]


def test_local_placement_builds_the_registered_env_here():
    env = placement.make_env(ENV_ID, "local", max_turns=2)
    try:
        assert type(env.unwrapped) is type(make(ENV_ID).unwrapped)
    finally:
        env.close()


def test_the_environment_variable_chooses_the_placement(monkeypatch):
    monkeypatch.setenv("GEM_ENV_BACKEND", "slurm")
    with pytest.raises(ValueError, match=r"GEM_ENV_BACKEND='slurm' is not an env placement; choose one of \('local', 'ray'\)"):
        placement.make_env(ENV_ID)
    with pytest.raises(ValueError, match=r"env_backend='nowhere'"):
        placement.make_env(ENV_ID, "nowhere")
    monkeypatch.delenv("GEM_ENV_BACKEND")
    assert placement.env_backend_from_environment() == "local"


#: Where episodes are played: nothing here may build an env except through the entry point.
EPISODE_PACKAGES = ("gem_core/rollout", "gem_core/rows", "gem_core/eval", "gem_core/curriculum", "gem_core/judge", "adapters")
#: Calls of ``make`` there that play no episode, and why.
NOT_AN_EPISODE = {
    "gem_core/curriculum/ladder.py": "builds each level once and closes it, to check its kwargs",
    # The TRL example's recipe (moved out of examples/train_trl.py): none of these is a training episode.
    "adapters/trl/recipe/options.py": "builds the env once and closes it, to check --env's kwargs before torch loads",
    "adapters/trl/recipe/report.py": "the random-move baseline the report prints, played in process",
    "adapters/trl/recipe/tiny_model.py": "random episodes that give the tiny tokenizer its corpus",
}


def _make_calls(root) -> dict[str, list[int]]:
    import ast

    found: dict[str, list[int]] = {}
    for package in EPISODE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                func = node.func if isinstance(node, ast.Call) else None
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name in ("make", "make_env") and not (isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "placement"):
                    found.setdefault(str(path.relative_to(root)), []).append(node.lineno)
    return found


def test_no_episode_path_builds_an_env_around_the_entry_point():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert {path: lines for path, lines in _make_calls(root).items() if path not in NOT_AN_EPISODE} == {}
