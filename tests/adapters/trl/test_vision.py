"""A tiny vision-language model trains on ``vision:ChartQA-v0`` through the real ``trl.GRPOTrainer`` (CPU).

TRL's own VLM path with ``rollout_func``: the dataset has an ``images`` column, TRL hands the prompts
(made multimodal by ``prepare_multimodal_messages``) to GEM's rollout and computes ``pixel_values`` and
``image_grid_thw`` for the loss from those images with the processor. The model is a random-weight
Qwen2VLForConditionalGeneration and the processor a Qwen2VLProcessor, both built in-process
(gem_core.testing); no downloads.
"""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("PIL")

from trl import GRPOTrainer

from gem_adapters.trl import GemRolloutFunc, env_return_reward, make_dataset, trajectories_to_rollout
from gem_core.testing import make_vision_model, make_vision_processor

ENV_ID = "vision:ChartQA-v0"


@pytest.fixture(scope="module")
def processor():
    return make_vision_processor()


def test_the_dataset_has_trl_s_images_column_with_each_episode_s_chart(processor):
    dataset = make_dataset(ENV_ID, n=3, seed_start=0)
    assert set(dataset.column_names) == {"prompt", "images"}
    import gem_core

    env = gem_core.make(ENV_ID)
    for seed, row in enumerate(dataset):
        observation, info = env.reset(seed=seed)
        assert row["prompt"][-1]["content"] == observation
        (image,) = row["images"]
        assert image.convert("RGB").tobytes() == info["images"][0].tobytes()


def test_grpo_trains_a_tiny_vlm_on_chart_qa_with_the_pixels_in_the_loss(grpo_config, processor):
    model = make_vision_model(processor, seed=0)
    before = copy.deepcopy(model.state_dict())
    seen: list[dict] = []

    class Recorder(GRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen.append({k: v.clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
            return super()._compute_loss(model, inputs)

    def spread(completions, **kwargs):
        # The random model format-errors on every chart (equal returns, zero advantages): a reward that
        # varies with the sampled text gives the loss a gradient, which must then reach the vision tower.
        return [float(sum(map(ord, str(c))) % 5) for c in completions]

    rollout = GemRolloutFunc(max_new_tokens=8)
    trainer = Recorder(
        model=model, reward_funcs=[env_return_reward, spread], args=grpo_config(max_completion_length=48, max_steps=2),
        processing_class=processor, train_dataset=make_dataset(ENV_ID, n=8, seed_start=0), rollout_func=rollout,
    )
    trainer.train()
    assert seen, "the loss never ran"
    batch = seen[-1]
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    # The loss saw every episode's chart: one grid per prompt, as many placeholders as the grids ask for.
    assert batch["image_grid_thw"].shape[0] == batch["prompt_ids"].shape[0] == len(rollout.last_trajectories)
    assert batch["pixel_values"].shape[0] == int(batch["image_grid_thw"].prod(-1).sum())
    assert int((batch["prompt_ids"] == pad).sum()) == int(batch["image_grid_thw"].prod(-1).sum()) // 4
    for trajectory in rollout.last_trajectories:
        (image,) = trajectory.images
        assert image.turn == 0 and trajectory.prompt_ids[image.start : image.start + image.num_tokens] == [pad] * image.num_tokens
    # The rows' image tokens in the loss's M-RoPE mask sit exactly where the prompt's placeholders are.
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    assert torch.equal(batch["mm_token_type_ids"].bool(), ids == pad)
    changed = [name for name, value in model.state_dict().items() if not torch.equal(value, before[name])]
    assert any(name.startswith("model.visual") or "visual" in name for name in changed), "the vision tower got no update"
    assert any("language_model" in name or "embed_tokens" in name for name in changed)


def test_an_image_after_the_first_turn_is_refused_with_the_reason():
    from gem_core.rollout import TokenTrajectory
    from gem_core.rollout.vision import TrajectoryImage

    trajectory = TokenTrajectory(
        prompt_ids=[1], response_ids=[2], loss_mask=[1], logprobs=[0.0], turn_spans=[(0, 1)], rewards=[0.0],
        terminated=True, truncated=False, env_id="vision:Other-v0", images=[TrajectoryImage(turn=1, start=1, num_tokens=1, grid_thw=(1, 2, 2))],
    )
    with pytest.raises(ValueError, match="only the\\s+prompt's images|prompt's images"):
        trajectories_to_rollout([trajectory], eos_token_id=0)
