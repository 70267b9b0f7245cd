"""The agent file for OpenRLHF: ``--train.agent_func_path $(python -m gem_adapters.files openrlhf-agent --path)``.

To change the fields, copy it first: ``python -m gem_adapters.files openrlhf-agent > gem_agent.py``.

OpenRLHF imports this file in every vLLM engine actor and builds ``AgentExecutor()`` with no
arguments. Each dataset row's label names the env and seed (see ``gem_adapters.openrlhf.make_dataset``);
change the fields below, not the code.
"""

from gem_adapters.openrlhf import AgentConfig, GemAgentExecutor


class AgentExecutor(GemAgentExecutor):
    config = AgentConfig(
        system_prompt=None,  # None: the chat template's default system message
        max_turns=None,  # None: the env's own turn limit
        max_new_tokens=512,  # OpenRLHF otherwise lets one turn use the whole --data.max_len budget
        reward_gamma=1.0,  # < 1: OpenRLHF's summed reward becomes the discounted return
        # A task sampler (gem_core.curriculum) choosing each prompt's episode instead of its label, e.g.
        # {"tasks": ["game:GuessTheNumber-v0-easy", "game:GuessTheNumber-v0"], "weighting": "band", "state_dir": "ckpt/curriculum"}
        curriculum=None,
        n_samples_per_prompt=1,  # with a curriculum: --rollout.n_samples_per_prompt (and --eval.n_samples_per_prompt the same)
    )
