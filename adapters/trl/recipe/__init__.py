"""The recipe of ``examples/train_trl.py``'s main job, importable: the example reads top to bottom (its
arguments, the model, ``GRPOConfig``, the trainer, the report) and imports the parts a reader need not see.

- :mod:`.options`: the argument checks (every bad argument in one line before torch loads), the main job's
  defaults and the command line built from the example's ``Args`` dataclass;
- :mod:`.tiny_model`: the CPU run's model, a random-weight 2-layer transformer with a tokenizer trained on the
  env's own text (each move one token), and the warm start that teaches it the move format;
- :mod:`.report`: the per-step console line, ``log.jsonl``, ``metrics.json``, the reward curve, Ctrl-C, the run's
  hold on its ``--out`` and the command's exit codes.

Nothing here imports torch, transformers or TRL at import time.
"""

from gem_adapters.trl.recipe.options import (
    CURRICULA,
    DEFAULT_ENV,
    DEFAULT_ENV_KWARGS,
    REPORT_TO,
    InvalidRecipeArgument,
    check_args,
    check_tasks,
    dataclass_parser,
    env_kwargs_for,
    env_mixture,
    report_to_list,
    task_sampler,
)
from gem_adapters.trl.recipe.report import (
    OUT_LOCK_FILE,
    StepLog,
    exit_code,
    own_output_folder,
    plot_reward_curve,
    random_move_return,
    run_metrics,
    save_model,
    step_log_callback,
    stop_signals,
    train_until_stopped,
    write_report,
)
from gem_adapters.trl.recipe.tiny_model import MAX_MOVE_TOKENS, TINY_VOCAB_SIZE, format_warm_start, random_episodes, tiny_model_and_tokenizer

__all__ = [
    "CURRICULA",
    "DEFAULT_ENV",
    "DEFAULT_ENV_KWARGS",
    "MAX_MOVE_TOKENS",
    "OUT_LOCK_FILE",
    "REPORT_TO",
    "TINY_VOCAB_SIZE",
    "InvalidRecipeArgument",
    "StepLog",
    "check_args",
    "check_tasks",
    "dataclass_parser",
    "env_kwargs_for",
    "env_mixture",
    "exit_code",
    "format_warm_start",
    "own_output_folder",
    "plot_reward_curve",
    "random_episodes",
    "random_move_return",
    "report_to_list",
    "run_metrics",
    "save_model",
    "step_log_callback",
    "stop_signals",
    "task_sampler",
    "tiny_model_and_tokenizer",
    "train_until_stopped",
    "write_report",
]
