"""gem_adapters.rl2.reset_step driven by rl-square 0.0.2's own rollout loop (``Rollout.rollout``).

rl-square's ``Rollout`` class comes from the ``rl_square_rollout`` fixture (``conftest.py``: stand-ins for
its GPU-only imports); the loop, the state dict bookkeeping and ``state_dict_to_tensor_dict`` are
rl-square's code.
"""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("RL2.datasets", reason="needs rl-square==0.0.2 (nox -s rl2)")

from gem_adapters.files import shipped_path  # noqa: E402
from gem_adapters.rl2 import ResetStepEnv  # noqa: E402
from gem_adapters.rl2.api import installed_rl2_api  # noqa: E402
from gem_core.rows import write_jsonl  # noqa: E402
from gem_adapters.rl2.make_dataset import make_dataset  # noqa: E402
from gem_core.registry import make  # noqa: E402
from gem_core.rollout import run_episode  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402

ENV_ID = "game:GuessTheNumber-v0"
ACTIONS = ["no idea", "\\boxed{10}", "\\boxed{5}", "\\boxed{15}", "\\boxed{3}", "\\boxed{17}"]
ENV_FILE = shipped_path("rl2-reset-step")


async def test_rl_square_rollout_gives_the_core_episode(tokenizer, fake_router, rl_square, tmp_path, open_envs):
    from omegaconf import OmegaConf
    from RL2.datasets import RLDataset

    # The row goes through rl-square's own dataset code, as train_data.path would.
    write_jsonl(make_dataset(ENV_ID, 3), tmp_path / "train.jsonl")
    checked = open_envs.made  # make_dataset builds (and closes) the env once to check its kwargs
    dataset = RLDataset(OmegaConf.create({"path": str(tmp_path / "train.jsonl"), "responses_per_prompt": 1}), tokenizer)
    (row,) = dataset.collate_fn([dataset[2]])
    assert "prompt" not in row, "rl-square calls reset() only for rows without a prompt"

    policy = ScriptedPolicy(tokenizer, ACTIONS)
    core = await run_episode(make(ENV_ID), policy, tokenizer, seed=2)
    env = ResetStepEnv(tokenizer)
    async with fake_router(policy) as (url, _):
        tensor_dicts, metric = await rl_square(url, env).rollout(row, train=True)

    assert len(tensor_dicts) == 1, "GEM's next_state extends the previous state: one sequence per episode"
    td = tensor_dicts[0]
    full = core.prompt_ids + core.response_ids
    mask = [0] * len(core.prompt_ids) + core.loss_mask
    rewards = [0.0] * len(core.prompt_ids) + core.token_rewards
    assert td["states"].tolist() == full[:-1]
    assert td["actions"].tolist() == [t if m else 0 for t, m in zip(full, mask)][1:]
    assert td["action_mask"].tolist() == mask[1:]
    assert td["rewards"].tolist() == pytest.approx(rewards[1:])
    assert td["llm_logps"].tolist() == pytest.approx(([0.0] * len(core.prompt_ids) + core.logprobs)[1:], abs=1e-6)
    assert metric["n_turns"] == [core.num_turns]
    assert metric["scores"] == pytest.approx([core.episode_return])
    assert len(env.episodes) == 0 and open_envs.made - checked == 1 and open_envs.open == 0, "finished episodes are closed"


async def test_episodes_rl_square_drops_at_max_turns_are_closed_past_the_bound(tokenizer, fake_router, rl_square, tmp_path, open_envs):
    from RL2.datasets import RLDataset
    from omegaconf import OmegaConf

    write_jsonl(make_dataset(ENV_ID, 6), tmp_path / "train.jsonl")
    checked = open_envs.made  # make_dataset builds (and closes) the env once to check its kwargs
    dataset = RLDataset(OmegaConf.create({"path": str(tmp_path / "train.jsonl"), "responses_per_prompt": 1}), tokenizer)
    env = ResetStepEnv(tokenizer, max_open_episodes=2)
    policy = ScriptedPolicy(tokenizer, ["\\boxed{1}"] * 8)  # wrong guesses: rl-square's max_turns=1 cuts every episode
    async with fake_router(policy) as (url, _):
        for i in range(6):
            (row,) = dataset.collate_fn([dataset[i]])
            await rl_square(url, env, max_turns=1).rollout(row, train=True)
    assert open_envs.made - checked == 6
    assert len(env.episodes) == open_envs.open == 2, "the oldest abandoned episodes are closed"


async def test_step_without_reset_says_what_is_missing(tokenizer):
    with pytest.raises(RuntimeError, match="extra_info returned by reset"):
        await ResetStepEnv(tokenizer).step("s", "a", {"label": "{}"})


@pytest.mark.parametrize("key", [["list"], {"d": 1}])
async def test_an_episode_key_that_is_not_text_says_what_is_missing(tokenizer, key):
    """A list or dict under extra_info's episode key raised TypeError (unhashable) from the episodes' lookup."""
    with pytest.raises(RuntimeError, match="extra_info returned by reset"):
        await ResetStepEnv(tokenizer).step("s", "a", {"label": "{}", "gem_episode": key})


@pytest.mark.parametrize(
    "kwargs, message",
    [({"max_turns": 0}, "ResetStepEnv: max_turns=0 must be a positive whole number of turns, or None."),
     ({"max_total_tokens": -1}, "ResetStepEnv: max_total_tokens=-1 must be a positive whole number, or None."),
     ({"system_prompt": 5}, "ResetStepEnv: system_prompt=5 must be a str, or None.")],
)
def test_bad_options_are_refused_when_the_env_is_built_naming_the_key(tokenizer, kwargs, message):
    with pytest.raises(ValueError) as error:  # before: built, then failed at the first reset
        ResetStepEnv(tokenizer, **kwargs)
    assert str(error.value) == message


async def test_step_after_the_episode_ended_says_it_is_over(tokenizer, open_envs):
    env = ResetStepEnv(tokenizer, max_turns=1)
    prompt, info = await env.reset({"label": make_dataset(ENV_ID, 1)[0]["extra_info"]["label"]})
    assert (await env.step(prompt, "\\boxed{1}", info))["done"]
    with pytest.raises(RuntimeError) as error:
        await env.step(prompt, "\\boxed{2}", info)
    assert str(error.value).endswith("is over (its last step() returned done=True): reset() starts the next one.")
    assert open_envs.open == 0


@pytest.mark.parametrize("action", [None, 5, ["a"]])
async def test_a_non_text_action_is_a_malformed_move_not_a_crash(tokenizer, action):
    env = ResetStepEnv(tokenizer, max_turns=3)
    prompt, info = await env.reset({"label": make_dataset(ENV_ID, 1)[0]["extra_info"]["label"]})
    result = await env.step(prompt, action, info)  # before: AttributeError 'endswith'
    assert result["reward"] == make(ENV_ID).format_penalty and not result["done"]
    assert result["next_state"].startswith(prompt) and len(result["next_state"]) > len(prompt)
    assert (await env.step(result["next_state"], "\\boxed{50}", info))["reward"] is not None  # the episode goes on


def _load_env_file():
    spec = importlib.util.spec_from_file_location("custom_module", ENV_FILE)  # as rl-square loads rollout.env_path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pypi_env_file_renders_with_the_actors_model(monkeypatch):
    assert installed_rl2_api() == "reset_step"
    monkeypatch.setenv("GEM_RL2_MODEL", "org/the-actor-model")
    module = _load_env_file()
    assert callable(module.reset) and callable(module.step)
    assert module._env._tokenizer == "org/the-actor-model"


def test_pypi_env_file_without_the_model_name_says_which_variable(monkeypatch):
    monkeypatch.delenv("GEM_RL2_MODEL", raising=False)
    with pytest.raises(RuntimeError, match="GEM_RL2_MODEL"):
        _load_env_file()
