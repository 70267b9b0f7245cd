"""examples/train_trl.py with a mixture of tasks: `--env ID[:WEIGHT]` repeated, `--curriculum`, bad values
refused in one line before training, the tiny tokenizer covering every env, and a short run whose tasks
come from the sampler and whose metrics hold each task's numbers."""

from __future__ import annotations

import json

import pytest
from test_learning import load_example

import gem_core
from gem_adapters.trl.recipe import InvalidRecipeArgument
from gem_core.curriculum import SAMPLER_STATE_FILE, Task

GUESS, EASY, HARD = "game:GuessTheNumber-v0", "game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0-hard"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", f"{GUESS}:0"], "weights must be finite numbers above zero"),
        (["--env", f"{GUESS}:many"], "is not a number; write --env"),
        (["--env", GUESS, "--curriculum", "adaptive"], "--curriculum adaptive chooses among tasks, and there is one"),
        (["--env", GUESS, "--env", EASY, "--curriculum", "greedy"], "--curriculum must be 'uniform', 'adaptive' or 'progress'"),
        (["--env", GUESS, "--env", GUESS], f"--env {GUESS} is given twice"),
        (["--env", GUESS, "--env", EASY, "--curriculum", "adaptive", "--curriculum_floor", "0.9"], "floor 0.9 is no probability"),
        (["--env", GUESS, "--env", "game:Wordel-v0:2"], "Did you mean 'game:Wordle-v0'"),
    ],
)
def test_a_bad_mixture_or_curriculum_fails_in_one_line_and_writes_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert load_example().cli([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_each_env_of_a_mixture_gets_its_own_kwargs_and_weight():
    example = load_example()
    tasks = example.check_tasks(example.Args(env=[GUESS, f"{HARD}:2"]))
    assert [(t.env_id, dict(t.env_kwargs), t.weight) for t in tasks] == [(GUESS, {}, 1.0), (HARD, {}, 2.0)]
    assert example.check_args(example.Args(env=[GUESS, HARD])) == {}  # the first env's
    everywhere = example.check_tasks(example.Args(env=[EASY, HARD], env_kwargs='{"max_turns": 4}'))
    assert all(dict(t.env_kwargs) == {"max_turns": 4} for t in everywhere)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], [(GUESS, "main job")]),  # no --env: the main job's 1-4 game
        (["--env", GUESS], [(GUESS, {})]),  # named: the registered game
        (["--env", f"{GUESS}:1", "--env", HARD], [(GUESS, {}), (HARD, {})]),
        (["--env", HARD, "--env", GUESS], [(HARD, {}), (GUESS, {})]),
    ],
)
def test_only_a_run_without_env_plays_the_main_jobs_settings(argv, expected, monkeypatch):
    """A named game:GuessTheNumber-v0 (alone or in a mixture) is the registered game, not the main job's 1-4."""
    example = load_example()
    seen = []
    monkeypatch.setattr(example, "main", lambda args: seen.append(example.check_tasks(args)) or {"interrupted": False})
    assert example.cli(argv) == 0
    (tasks,) = seen
    expected = [(env_id, example.DEFAULT_ENV_KWARGS if kwargs == "main job" else kwargs) for env_id, kwargs in expected]
    assert [(t.env_id, dict(t.env_kwargs)) for t in tasks] == expected
    registered = gem_core.spec(GUESS).kwargs
    for task in tasks:  # what is built is the registered game wherever it is named
        if task.env_id == GUESS and argv:
            env = gem_core.make(GUESS, **task.env_kwargs)
            assert (env.unwrapped.min_number, env.unwrapped.max_number) == (registered["min_number"], registered["max_number"])
            env.close()


def test_tasks_given_from_python_keep_their_own_kwargs():
    """The curriculum bench mixes the main job's task with registered levels (Task objects, not --env text)."""
    example = load_example()
    tasks = [Task(GUESS, example.DEFAULT_ENV_KWARGS), Task(HARD, {}, weight=2.0)]
    assert example.check_tasks(example.Args(env=tasks)) == tasks
    with pytest.raises(InvalidRecipeArgument, match="do not fit"):
        example.check_tasks(example.Args(env=[Task(GUESS, {"bogus": 1})]))


def test_the_tiny_tokenizer_of_a_mixture_makes_every_envs_moves_single_tokens():
    example = load_example()
    envs = [(GUESS, example.DEFAULT_ENV_KWARGS), (HARD, {})]
    _, tokenizer, max_new_tokens, _ = example.tiny_model_and_tokenizer(GUESS, example.DEFAULT_ENV_KWARGS, 0, None, envs=envs)
    assert max_new_tokens == 1
    for move in ("\\boxed{3}", "\\boxed{77}"):
        assert len(tokenizer(move, add_special_tokens=False)["input_ids"]) == 1, move


def test_a_short_mixture_run_draws_its_tasks_from_the_sampler_and_reports_each(tmp_path):
    example = load_example()
    out = tmp_path / "run"
    # The main job's 1-4 game beside two registered levels: three tasks of different difficulty (as the bench mixes them).
    tasks = [Task(GUESS, example.DEFAULT_ENV_KWARGS), Task(EASY, {}, weight=2.0), Task(HARD, {})]
    metrics = example.main(example.Args(env=tasks, curriculum="adaptive", steps=2, prompts_per_step=3,
                                        warm_start_steps=1, out=str(out)))
    names = [task["name"] for task in metrics["tasks"]]
    assert names == [f"{GUESS}[max_number=4,max_turns=3,min_number=1]", EASY, HARD]
    assert metrics["curriculum"] == "adaptive" and metrics["env"] == {GUESS: 1.0, EASY: 2.0, HARD: 1.0}
    assert len(metrics["frac_reward_zero_std_per_step"]) == len(metrics["task_metrics_per_step"]) == 2
    state = json.loads((out / SAMPLER_STATE_FILE).read_text())
    assert state["draws"] == 2 * 3  # one draw per GRPO group
    assert sum(task["stats"]["episodes"] for task in state["tasks"].values()) == 2 * 3 * 2
    logged = {key for step in metrics["task_metrics_per_step"] for key in step}
    assert {f"gem/curriculum/{name}/probability" for name in names} <= logged
    assert any(key.startswith("gem/task/") and key.endswith("/success") for key in logged)
    per_task = metrics["random_move_reward_per_task"]
    assert per_task[HARD] < per_task[EASY] < per_task[names[0]]  # three tasks of different difficulty
