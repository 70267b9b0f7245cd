"""RL2 (main, installed from source) env file: ``rollout.env_path=$(python -m gem_adapters.files rl2-generate --path)``.

To change the fields, copy it first: ``python -m gem_adapters.files rl2-generate > gem_env.py``.

RL2 imports this file in its rollout worker and awaits ``generate(config, tokenizer, router_url,
sample)`` per sample; each dataset row names its GEM env and seed (``python -m
gem_adapters.rl2``). Change the fields below, not the code.
"""

from gem_adapters.rl2 import GenerateEnv, check_rl2_api

check_rl2_api("generate")  # fails at start-up, naming the right env file, if RL2 calls reset/step instead

generate = GenerateEnv(
    system_prompt=None,  # None: the chat template's default
    max_turns=None,  # None: the env's own turn limit (RL2 main has no turn cap)
    max_total_tokens=8192,  # keep under actor.max_length_per_device
    # A task sampler (gem_core.curriculum) choosing each training row's episode instead of its label, e.g.
    # {"tasks": ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"], "weighting": "band", "state_dir": "ckpts/curriculum"}
    curriculum=None,
).generate
