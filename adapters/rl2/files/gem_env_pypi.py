"""rl-square 0.0.2 (PyPI) env file: ``rollout.env_path=$(python -m gem_adapters.files rl2-reset-step --path)``.

To change the fields, copy it first: ``python -m gem_adapters.files rl2-reset-step > gem_env.py``.

rl-square imports this file and calls ``reset(extra_info)`` for rows without a prompt, then
``step(state, action, extra_info)`` up to ``rollout.max_turns`` times (default 1: raise it). Its hook
passes no tokenizer, so the actor's model name comes from ``GEM_RL2_MODEL`` (examples/train_rl2.py
sets it from ``--model``; set it to ``actor.model_name`` when launching RL2 yourself).
"""

from gem_adapters.rl2 import ResetStepEnv, check_rl2_api
from gem_core.errors import UsageError
from gem_core.settings import environment_value

check_rl2_api("reset_step")  # fails at start-up, naming the right env file, if RL2 calls generate instead
MODEL = environment_value("GEM_RL2_MODEL")
if not MODEL:
    raise UsageError("Set GEM_RL2_MODEL to the actor's model (actor.model_name) so the env renders with its chat template.")

_env = ResetStepEnv(
    tokenizer=MODEL,  # loaded on first reset
    system_prompt=None,
    max_turns=None,  # None: the env's own limit; keep rollout.max_turns at least this high
    max_total_tokens=8192,  # keep under actor.max_length_per_device
)
reset, step = _env.reset, _env.step
