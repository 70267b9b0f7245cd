"""Image observations, token-exact: the processor's placeholder ids and pixel inputs, kept per turn.

An env shows images by returning them in ``info["images"]`` (a list of PIL images) beside the
observation text, from ``reset`` or ``step``. They belong to that observation's user turn and come
before its text, the layout TRL's ``prepare_multimodal_messages`` and Qwen2-VL's examples use.

A vision-language model sees an image as a run of placeholder ids in the token sequence
(Qwen2-VL: ``<|vision_start|>`` then ``<|image_pad|>`` once per merged patch, then ``<|vision_end|>``) and,
beside the ids, the image processor's ``pixel_values`` and ``image_grid_thw``. The session builds the
turn's ids the way it builds text turns (:class:`~gem_core.rollout.chat_template.ChatTemplate` renders
the user turn with ``{"type": "image"}`` items, so the template's own vision markers are control ids
and the text stays text), and :class:`ImageEncoder` then widens each image's single placeholder to the
number of tokens the processor gives that image: the same ids ``processor(text=..., images=...)``
produces for the same conversation. Each image is recorded as a :class:`TrajectoryImage` with the
position of its first placeholder id, so pixels and placeholders line up with the turn that produced them.

"A processor" is anything with ``.tokenizer``, ``.image_processor`` and ``.image_token`` (``transformers``'
``AutoProcessor`` for Qwen2-VL and Qwen2.5-VL); pass it where a tokenizer goes (``run_episode``,
``EpisodeSession``, TRL's ``processing_class``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gem_core.errors import InvalidArgument, InvalidArgumentType

__all__ = ["ImageEncoder", "TrajectoryImage", "is_processor", "message_text", "multimodal_inputs", "require_prompt_images_only", "text_tokenizer"]


@dataclass(frozen=True)
class TrajectoryImage:
    """One image of an episode, where its placeholder ids sit in ``prompt_ids + response_ids``."""

    turn: int
    """0: the first observation (the prompt); ``t``: the observation after turn ``t``."""
    start: int
    """Index of its first placeholder id in ``prompt_ids + response_ids``."""
    num_tokens: int
    """How many placeholder ids it occupies (``prod(grid_thw) // merge_size**2`` for Qwen2-VL)."""
    grid_thw: tuple[int, int, int]
    """The image processor's ``image_grid_thw`` row for this image."""
    pixel_values: Any = None
    """The image processor's rows for this image (numpy, ``(prod(grid_thw), patch_dim)``); None when read
    back from a trajectory file (pixels are not written: replay the seed to get them)."""


def is_processor(obj: Any) -> bool:
    """Whether ``obj`` is a multimodal processor (it has a tokenizer and an image processor)."""
    return getattr(obj, "image_processor", None) is not None and getattr(obj, "tokenizer", None) is not None


def text_tokenizer(obj: Any) -> Any:
    """The tokenizer of a processor, or ``obj`` itself when it is a tokenizer."""
    return obj.tokenizer if is_processor(obj) else obj


def message_text(content: Any) -> str:
    """A chat message's text, whether its content is a string or a list of typed items (the multimodal
    format, in which trainers such as TRL rewrite string contents)."""
    if isinstance(content, list):
        return "".join(str(item.get("text", "")) for item in content if isinstance(item, dict) and item.get("type") == "text")
    return content


def require_prompt_images_only(trajectory: Any, framework: str) -> None:
    """Raise when an episode showed images after its first observation to a framework that feeds the
    model only the prompt's images (it recomputes pixel inputs from its dataset).

    Raises:
        ValueError: naming the env and what to use instead.
    """
    if any(image.turn > 0 for image in trajectory.images):
        raise InvalidArgument(
            f"{trajectory.env_id} showed an image after the first turn; {framework} feeds the model only the prompt's "
            "images (its dataset's 'images' column). Use an env that shows its images in the first observation."
        )


class ImageEncoder:
    """A processor's image side: pixel inputs per image and its placeholder ids widened to the right count.

    Raises:
        InvalidArgumentType: if ``processor`` has no ``tokenizer`` and ``image_processor``.
        InvalidArgument: if the processor's image token is not in its tokenizer.
    """

    def __init__(self, processor: Any):
        if not is_processor(processor):
            raise InvalidArgumentType(f"Expected a processor with .tokenizer and .image_processor, got {type(processor).__name__}.")
        self.processor = processor
        self.image_processor = processor.image_processor
        token = getattr(processor, "image_token", None)
        tokenizer = processor.tokenizer
        image_id = tokenizer.convert_tokens_to_ids(token) if token else None
        if image_id is None or image_id == tokenizer.unk_token_id:
            raise InvalidArgument(
                f"The processor's image token {token!r} is not in its tokenizer; add it as a special token "
                "(tokenizer.add_special_tokens) before building the processor."
            )
        self.image_token_id = int(image_id)
        self.merge_size = int(getattr(self.image_processor, "merge_size", 1) or 1)

    def encode(self, images: Sequence[Any]) -> list[tuple[Any, tuple[int, int, int], int]]:
        """Per image: ``(pixel_values rows, grid_thw, number of placeholder ids)``."""
        out = self.image_processor(images=list(images), return_tensors="np")
        pixels, grids = out["pixel_values"], out["image_grid_thw"]
        encoded, row = [], 0
        for grid in grids:
            t, h, w = (int(x) for x in grid)
            rows = t * h * w
            encoded.append((pixels[row : row + rows], (t, h, w), rows // (self.merge_size**2)))
            row += rows
        return encoded

    def expand(self, ids: list[int], encoded: Sequence[tuple[Any, tuple[int, int, int], int]]) -> tuple[list[int], list[int]]:
        """``ids`` with each image's single placeholder widened to its token count, and each image's
        first placeholder index in the result.

        Raises:
            ValueError: the rendered turn does not hold one placeholder per image (the chat template
                does not render ``{"type": "image"}`` items with the processor's image token).
        """
        found = [i for i, t in enumerate(ids) if t == self.image_token_id]
        if len(found) != len(encoded):
            raise InvalidArgument(
                f"The chat template rendered {len(found)} image placeholders for {len(encoded)} images; it must render "
                "each {'type': 'image'} content item with the processor's image token (use the model's own template)."
            )
        out: list[int] = []
        starts: list[int] = []
        last = 0
        for at, (_, _, count) in zip(found, encoded, strict=True):
            out.extend(ids[last:at])
            starts.append(len(out))
            out.extend([self.image_token_id] * count)
            last = at + 1
        out.extend(ids[last:])
        return out, starts


def multimodal_inputs(images: Sequence[TrajectoryImage]) -> dict[str, Any]:
    """The model's image inputs for a sequence holding ``images`` (in order): ``pixel_values`` and
    ``image_grid_thw`` as torch tensors, as Qwen2-VL's ``forward``/``generate`` take them; {} for none.

    Raises:
        InvalidArgument: if the images carry no pixel values (read back from a file).
    """
    import numpy as np
    import torch

    if not images:
        return {}
    if any(image.pixel_values is None for image in images):
        raise InvalidArgument("These images carry no pixel values (read back from a file); replay the episode to get them.")
    return {
        "pixel_values": torch.from_numpy(np.concatenate([np.asarray(i.pixel_values) for i in images])),
        "image_grid_thw": torch.tensor([list(i.grid_thw) for i in images], dtype=torch.long),
    }
