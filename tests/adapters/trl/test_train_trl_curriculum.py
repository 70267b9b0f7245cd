"""examples/train_trl.py with a mixture of tasks: `--env ID[:WEIGHT]` repeated, `--curriculum`, bad values
refused in one line before training, the tiny tokenizer covering every env, and a short run whose tasks
come from the sampler and whose metrics hold each task's numbers."""

from __future__ import annotations

import json

import pytest
from test_learning import load_example

from gem_core.curriculum import SAMPLER_STATE_FILE

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
    assert [(t.env_id, dict(t.env_kwargs), t.weight) for t in tasks] == [(GUESS, example.DEFAULT_ENV_KWARGS, 1.0), (HARD, {}, 2.0)]
    assert example.check_args(example.Args(env=[GUESS, HARD])) == example.DEFAULT_ENV_KWARGS  # the first env's
    everywhere = example.check_tasks(example.Args(env=[EASY, HARD], env_kwargs='{"max_turns": 4}'))
    assert all(dict(t.env_kwargs) == {"max_turns": 4} for t in everywhere)


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
    metrics = example.main(example.Args(env=[GUESS, f"{EASY}:2", HARD], curriculum="adaptive", steps=2, prompts_per_step=3,
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
