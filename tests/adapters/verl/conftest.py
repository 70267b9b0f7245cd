"""Fixtures for the verl adapter: verl's real config, a server manager backed by the tiny model, and the
agent loop built the way verl's ``AgentLoopWorker`` builds it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gem_core import Env, list_envs, register

from gem_core.rollout.policy import Policy, SamplingParams, TransformersPolicy

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from verl.workers.rollout.replica import TokenOutput

# verl is imported inside the fixtures: without it, each test module skips itself (pytest.importorskip).

REPO_ROOT = Path(__file__).resolve().parents[3]
AGENT_LOOP_YAML = REPO_ROOT / "adapters" / "verl" / "gem_agent_loop.yaml"

PROMPT_LENGTH = 256
RESPONSE_LENGTH = 160


def compose_trainer_config(overrides: list[str] = ()) -> DictConfig:
    """verl's own ``ppo_trainer`` config (the one ``python -m verl.trainer.main_ppo`` composes)."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=list(overrides))


def adapter_config(*, prompt_length: int = PROMPT_LENGTH, response_length: int = RESPONSE_LENGTH) -> DictConfig:
    """verl's trainer config with the overrides a GEM user sets (examples/train_verl.py)."""
    return compose_trainer_config(
        [
            "actor_rollout_ref.rollout.name=vllm",
            f"data.max_prompt_length={prompt_length}",
            f"data.max_response_length={response_length}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}",
        ]
    )


@pytest.fixture(scope="session")
def trainer_config() -> DictConfig:
    return adapter_config()


@pytest.fixture(scope="session")
def make_trainer_config() -> Callable[..., DictConfig]:
    """``make_trainer_config(prompt_length=..., response_length=...)``."""
    return adapter_config


@pytest.fixture(scope="session")
def response_length(trainer_config) -> int:
    return int(trainer_config.actor_rollout_ref.rollout.response_length)


@pytest.fixture(scope="session")
def server_for() -> Callable[[Policy], "PolicyServerManager"]:
    """``server_for(policy)``: a verl-like server manager sampling with a GEM Policy."""
    return PolicyServerManager


def verl_sampling_params(config: DictConfig) -> dict[str, Any]:
    """What ``AgentLoopWorker.generate_sequences`` passes to ``run`` in training."""
    rollout = config.actor_rollout_ref.rollout
    return dict(
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        top_k=rollout.top_k,
        repetition_penalty=1.0,
        logprobs=rollout.calculate_log_probs,
    )


class PolicyServerManager:
    """Stands in for verl's ``LLMServerClient``: same ``generate`` signature, backed by a GEM Policy.

    Records every call so tests can check request ids and per-turn limits. A request without ``max_tokens``
    (verl's ``single_turn_agent`` sends none; vLLM then fills the response budget) samples ``default_max_tokens``.
    """

    def __init__(self, policy: Policy, default_max_tokens: int = 16):
        self.policy = policy
        self.default_max_tokens = default_max_tokens
        self.calls: list[dict[str, Any]] = []
        self.outputs: list[TokenOutput] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any) -> TokenOutput:
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params), **kwargs})
        top_k = int(sampling_params.get("top_k", -1))
        sampling = SamplingParams(
            max_new_tokens=int(sampling_params.get("max_tokens", self.default_max_tokens)),
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            top_k=max(top_k, 0),
            stop_token_ids=sampling_params.get("stop_token_ids"),
        )
        generation = await self.policy.generate(list(prompt_ids), sampling)
        output = TokenOutput(
            token_ids=generation.token_ids,
            log_probs=generation.logprobs if sampling_params.get("logprobs") else None,
            stop_reason="aborted" if generation.finish_reason == "abort" else "completed",
        )
        self.outputs.append(output)
        return output


@pytest.fixture()
def model_server(tiny_model, tiny_tokenizer) -> PolicyServerManager:
    """The tiny model behind verl's generate signature (torch's RNG seeded: TransformersPolicy samples with it)."""
    import torch

    torch.manual_seed(0)
    return PolicyServerManager(TransformersPolicy(tiny_model, tiny_tokenizer))


def build_agent_loop(
    config: DictConfig, server_manager: Any, tokenizer: Any, *, name: str = "gem_env", hf_model_type: str | None = "qwen2", **overrides: Any
) -> Any:
    """Instantiate the loop exactly as ``AgentLoopWorker`` does: its YAML entry through ``hydra.utils.instantiate``.

    ``hf_model_type`` defaults to the tiny model's ``config.model_type`` (what the worker passes).
    """
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.import_utils import resolve_config_path

    entries = OmegaConf.load(resolve_config_path(config.actor_rollout_ref.rollout.agent.agent_loop_config_path))
    entry = next(e for e in entries if e.name == name)
    for key, value in overrides.items():
        entry[key] = value
    return hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=hf_model_type,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


def dataset_row(env_id: str, seed: int, *, env_kwargs: str = "{}", index: int = 0) -> dict[str, Any]:
    """The kwargs ``run`` receives for one sample (as the worker passes a row of the dataset)."""
    from gem_adapters.verl.make_dataset import make_dataset

    import numpy as np

    row = make_dataset(env_id, 1, seed_start=seed)[0]
    row["extra_info"]["env_kwargs"] = env_kwargs
    row["extra_info"]["index"] = index
    return {
        "data_source": np.array(row["data_source"], dtype=object),
        "reward_model": row["reward_model"],
        "extra_info": row["extra_info"],
        "raw_prompt": np.array(row["prompt"], dtype=object),
        "index": index,
        "tools_kwargs": {},
        "interaction_kwargs": {},
        "uid": f"uid-{index}",
        "priority": np.int64(index),
    }


@pytest.fixture()
def make_row() -> Callable[..., dict[str, Any]]:
    return dataset_row


@pytest.fixture()
def sampling_params(trainer_config) -> dict[str, Any]:
    return verl_sampling_params(trainer_config)


@pytest.fixture()
def make_agent_loop(trainer_config, tiny_tokenizer) -> Callable[..., Any]:
    """``make_agent_loop(server, config=None, **yaml_overrides)``; call it inside the running event loop, as the
    worker does."""

    def make(server: Any, config: DictConfig | None = None, *, hf_model_type: str | None = "qwen2", **overrides: Any) -> Any:
        config = config if config is not None else trainer_config
        return build_agent_loop(config, server, tiny_tokenizer, hf_model_type=hf_model_type, **overrides)

    return make


@pytest.fixture()
def run_loop(trainer_config, tiny_tokenizer) -> Callable[..., Any]:
    """``run_loop(server, row, **yaml_overrides)``: build the loop inside the running event loop and run one sample."""

    async def run(server: Any, row: dict[str, Any], **overrides: Any):
        loop = build_agent_loop(trainer_config, server, tiny_tokenizer, **overrides)
        return await loop.run(verl_sampling_params(trainer_config), **row)

    return run


class EmptyActionPaysEnv(Env):
    """Pays 1.0 for an empty action and 0.1 for any other; never ends by itself (an empty turn's reward placement)."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Say something.", {}

    def step(self, action):
        return "Good, again.", 1.0 if action == "" else 0.1, False, False, {}

    def sample_random_action(self):
        return "x"


EMPTY_ACTION_PAYS_ENV_ID = "verltest:EmptyActionPays-v0"
if EMPTY_ACTION_PAYS_ENV_ID not in list_envs():
    register(EMPTY_ACTION_PAYS_ENV_ID, EmptyActionPaysEnv)
