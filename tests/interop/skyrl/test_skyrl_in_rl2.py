"""Every SkyRL-Gym env that runs offline, played through a real GEM adapter: rl-square 0.0.2's own
dataset code and ``Rollout.rollout`` loop driving ``gem_adapters.rl2.ResetStepEnv`` (the RL2 adapter's CPU
path; the fixtures are the RL2 adapter tests', see ``tests/interop/conftest.py``) with a scripted policy
behind a fake SGLang router. The per-turn rewards rl-square writes into its tensors equal what SkyRL-Gym's
own ``step`` returns for the same actions."""

from __future__ import annotations

import pytest

pytest.importorskip("skyrl_gym")
pytest.importorskip("RL2.datasets", reason="needs rl-square==0.0.2 (nox -s interop installs it)")

import skyrl_gym  # noqa: E402
from test_skyrl import cases, retrieval_server, skyrl_rewards, sql_data  # noqa: E402,F401  (fixtures: the SkyRL tests' own)

from gem_adapters.rl2 import ResetStepEnv  # noqa: E402
from gem_adapters.rl2.make_dataset import make_dataset  # noqa: E402
from gem_core.rows import write_jsonl  # noqa: E402
from gem_core.testing import ScriptedPolicy  # noqa: E402


def turn_rewards(tensor_dict) -> list[float]:
    """rl-square puts each turn's reward on that turn's last action token."""
    mask, rewards = tensor_dict["action_mask"].tolist(), tensor_dict["rewards"].tolist()
    return [rewards[i] for i in range(len(mask)) if mask[i] and (i + 1 == len(mask) or not mask[i + 1])]


async def test_every_offline_skyrl_env_plays_in_rl_square_s_rollout_with_skyrl_s_own_rewards(
        tokenizer, fake_router, rl_square, sql_data, retrieval_server, tmp_path, open_envs):  # noqa: F811
    from omegaconf import OmegaConf
    from RL2.datasets import RLDataset

    offline = cases(sql_data)
    offline["search"] = (
        {"prompt": [{"role": "user", "content": "Which city is the capital of France?"}],
         "reward_spec": {"ground_truth": {"target": ["Paris"]}}, "max_turns": 3},
        {"search_url": retrieval_server, "log_requests": False},
        ["<search>capital of France</search>", "<answer>Paris</answer>"],
    )
    own = {i for i in skyrl_gym.registry if ":" not in i}  # not the GEM ids register_gem_envs added there (test_skyrl)
    assert own == set(offline) and len(own) == 7, "every env SkyRL-Gym registers is played here"
    rows = []
    for skyrl_id, (row, env_config, _) in offline.items():
        rows += make_dataset(f"skyrl:{skyrl_id}", 1, env_kwargs={"row": row, **({"env_config": env_config} if env_config else {})})
    write_jsonl(rows, tmp_path / "train.jsonl")  # read back by rl-square's own RLDataset, as train_data.path is
    dataset = RLDataset(OmegaConf.create({"path": str(tmp_path / "train.jsonl"), "responses_per_prompt": 1}), tokenizer)
    checked = open_envs.made

    for i, (skyrl_id, (row, env_config, actions)) in enumerate(offline.items()):
        expected, _ = skyrl_rewards(skyrl_id, row, env_config, actions)
        (sample,) = dataset.collate_fn([dataset[i]])
        env = ResetStepEnv(tokenizer)
        async with fake_router(ScriptedPolicy(tokenizer, actions)) as (url, requests):
            tensor_dicts, metric = await rl_square(url, env, max_turns=5, max_new_tokens=256).rollout(sample, train=True)
        assert len(tensor_dicts) == 1, skyrl_id
        assert turn_rewards(tensor_dicts[0]) == pytest.approx(expected), skyrl_id
        assert metric["n_turns"] == [len(expected)] == [len(requests)], skyrl_id
        assert metric["scores"] == pytest.approx([sum(expected)]), skyrl_id
        assert len(env.episodes) == 0, f"{skyrl_id}: SkyRL's done ended the GEM episode"
    assert open_envs.made - checked == len(offline) and open_envs.open == 0
    # The rewards say something: a right answer scores, and per-turn rewards differ within an episode.
    assert skyrl_rewards("gsm8k", *offline["gsm8k"])[0] == [1.0]
    assert len(set(skyrl_rewards("gsm8k_multi_turn", *offline["gsm8k_multi_turn"])[0])) == 3
