"""Test fixtures for the whole project: a tiny tokenizer, a tiny causal LM and a scripted policy.

Everything here is built in-process from embedded data (no hub access, no files on disk), so any test
in the suite, adapters included, can run a real ``transformers`` model through the real rollout code
on a CPU in well under a second per episode.

- :func:`make_tokenizer` trains a byte-level BPE (about 1000 ids) with ``tokenizers`` on an embedded
  corpus and sets one of :data:`CHAT_TEMPLATES`, written in the styles of the common model families.
- :func:`make_model` builds a random-weight ``Qwen2ForCausalLM`` (hidden 64, 2 layers) for that
  tokenizer.
- :class:`ScriptedPolicy` is a :class:`~gem_core.rollout.policy.Policy` that "samples" given texts, with
  deterministic per-token log-probabilities (:meth:`ScriptedPolicy.logprob_of`) so alignment is testable.

``transformers``, ``tokenizers`` and ``torch`` are imported inside the functions, so importing this
module is cheap.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gem_core.errors import InvalidArgument, MissingFile
from gem_core.protocols import Tokenizer
from gem_core.rollout.policy import Generation, SamplingParams

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

__all__ = [
    "CHAT_TEMPLATES",
    "QWEN3_THINKING_SWITCH",
    "EnvLifecycles",
    "PREFIX_STABLE_TEMPLATES",
    "SPECIAL_TOKENS",
    "ScriptedPolicy",
    "QWEN2_VL_TEMPLATE",
    "VISION_TOKENS",
    "make_model",
    "make_tokenizer",
    "make_vision_model",
    "make_vision_processor",
    "load_script",
]


def load_script(path: str | Path, name: str) -> ModuleType:
    """A script (e.g. ``examples/train_trl.py``) imported as the module ``name``, so tests and benches use
    its code as is instead of copying it. It stays in ``sys.modules``: dataclasses defined in it resolve
    their annotations through their module.

    Raises:
        MissingFile: if ``path`` is not a Python file that can be imported.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise MissingFile(f"{path}: not a Python file that can be imported as {name!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


QWEN3_THINKING_SWITCH = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['role'] == 'assistant' and enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\n\n</think>\n\n' }}{% endif %}"
    "{{ message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\n\n</think>\n\n' }}{% endif %}"
    "{% endif %}"
)
"""Qwen3's thinking switch in a ChatML template: ``enable_thinking=False`` (a chat-template kwarg every
adapter must pass through) pre-fills an empty think block after the generation prompt.
"""

# Chat templates in the styles of the common families. Written here, not downloaded, so tests pin them.
_CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_LLAMA3 = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# Qwen2.5-style: a default system prompt when the conversation has none.
_SYSTEM_DEFAULT = (
    "{% if messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen3-style: assistant turns before the last user message lose their <think>...</think> block, so
# re-rendering the history changes earlier turns (the trajectory keeps the sampled tokens instead).
_DROP_THINKING = (
    "{% set ns = namespace(last_user=-1) %}"
    "{% for message in messages %}{% if message['role'] == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\n') %}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CHAT_TEMPLATES: dict[str, str] = {
    "chatml": _CHATML,
    "llama3": _LLAMA3,
    "system_default": _SYSTEM_DEFAULT,
    "drop_thinking": _DROP_THINKING,
}
"""Chat templates by style name; :func:`make_tokenizer` takes one of these names."""

PREFIX_STABLE_TEMPLATES: frozenset[str] = frozenset({"chatml", "llama3", "system_default"})
"""Templates whose rendering of a conversation only ever appends (earlier turns render the same way
whatever follows). ``drop_thinking`` is not: it rewrites earlier assistant turns.
"""

SPECIAL_TOKENS: list[str] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
"""Special tokens of every template style (one vocabulary serves all of them)."""
# Added but not special (as in Qwen3): decoding with skip_special_tokens keeps them in the action text.
_THINK_TOKENS = ["<think>", "</think>"]

# (eos, bos) per template: what the model emits to end its turn, and what starts a sequence.
_TEMPLATE_EOS_BOS: dict[str, tuple[str, str | None]] = {
    "chatml": ("<|im_end|>", None),
    "llama3": ("<|eot_id|>", "<|begin_of_text|>"),
    "system_default": ("<|im_end|>", None),
    "drop_thinking": ("<|im_end|>", None),
}

_CORPUS_LINES = [
    "I am thinking of an integer between 1 and 20 (inclusive). Guess it in at most 8 turns.",
    "After each guess I say whether the number is higher or lower.",
    "Answer with one integer inside \\boxed{}, e.g. \\boxed{10}. Turns left: 7.",
    "The number is higher than 10. The number is lower than 15. Correct! The number was 13.",
    "Invalid move: expected one integer inside \\boxed{}, e.g. \\boxed{1}.",
    "Guess the hidden five-letter word in at most 6 turns. Feedback per letter: G green, Y yellow, X gray.",
    "Your guess: \\boxed{crane} Feedback: G X Y X X. \\boxed{slate} \\boxed{audio} \\boxed{world}",
    "You are a helpful assistant. Think step by step, then give the final answer.",
    "<think>The range is 1 to 20, so a binary search starts at the middle.</think> \\boxed{10}",
    "Let me think about this. The answer is \\boxed{42}. So the result is 3 + 4 = 7.",
    "the quick brown fox jumps over the lazy dog while the cat sleeps on the mat",
    "What is the sum of 12 and 30? How many letters are in the word strawberry? There are three.",
    "reward success turn action observation episode policy model token game player move board",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 50 64 99 100 128 256 1000",
    "Hello, world! This is a test. Yes, no, maybe; (a) [b] {c} <d> \"e\" 'f' - _ + = * / \\ | ~ ` # $ % ^ &",
    "user assistant system tool function call result error invalid format penalty reward done",
]


def _corpus() -> list[str]:
    # Repeat so frequent pieces merge; the numbers give every digit and short number its own pieces.
    lines = list(_CORPUS_LINES) + [f"\\boxed{{{i}}} {i} {i * 7 % 101}" for i in range(200)]
    return lines * 3


@functools.cache
def _trained_tokenizer_json() -> str:
    """Train the byte-level BPE once per process; every template style reuses the same vocabulary."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in _THINK_TOKENS])
    return tokenizer.to_str()


_tokenizer_lock = threading.Lock()


@functools.cache
def make_tokenizer(template: str = "chatml") -> PreTrainedTokenizerFast:
    """A small byte-level BPE tokenizer trained in-process, with the chat template ``template``.

    Cached per template name: treat the result as read-only (do not add tokens or change its template).

    Args:
        template: a key of :data:`CHAT_TEMPLATES`.

    Raises:
        InvalidArgument: if ``template`` is not a key of :data:`CHAT_TEMPLATES`.
    """
    if template not in CHAT_TEMPLATES:
        raise InvalidArgument(f"Unknown chat template {template!r}; choose one of {sorted(CHAT_TEMPLATES)}.")
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    with _tokenizer_lock:
        backend = Tokenizer.from_str(_trained_tokenizer_json())
    eos, bos = _TEMPLATE_EOS_BOS[template]
    kwargs: dict[str, Any] = {"bos_token": bos} if bos else {}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos,
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 20,
        **kwargs,
    )
    tokenizer.chat_template = CHAT_TEMPLATES[template]
    return tokenizer


_models: dict[tuple[int, int], tuple[Any, Any]] = {}
_models_lock = threading.Lock()


def _seeded_eval_model(model_class: Any, config: Any, tokenizer: Any, seed: int) -> PreTrainedModel:
    """``model_class(config)`` with weights from ``seed`` alone (the global torch RNG is left as it was),
    in eval mode, generating up to ``tokenizer``'s end-of-sequence and padding with its pad token."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    model.eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def make_model(tokenizer: PreTrainedTokenizerFast, *, seed: int = 0) -> PreTrainedModel:
    """A tiny random-weight ``Qwen2ForCausalLM`` (hidden 64, 2 layers, 4 heads) for ``tokenizer``.

    Weights depend only on ``seed`` (the global torch RNG is left as it was). Cached per
    ``(tokenizer, seed)`` and returned in eval mode: treat it as read-only, or ``copy.deepcopy`` it
    before training.
    """
    key = (id(tokenizer), seed)
    with _models_lock:
        if key in _models:
            return _models[key][1]
        from transformers import Qwen2Config, Qwen2ForCausalLM

        config = Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        model = _seeded_eval_model(Qwen2ForCausalLM, config, tokenizer, seed)
        # Keep the tokenizer alive with the model so its id() is not reused by another object.
        _models[key] = (tokenizer, model)
        return model


QWEN2_VL_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or 'image' in item %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""Qwen2-VL's chat template, reduced to what the tests use: content is a string or a list of image and
text items (every role), an image renders as ``<|vision_start|><|image_pad|><|vision_end|>``.
"""
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
"""The vision tokens Qwen2-VL's tokenizer adds (special), in the order they are added here."""


def make_vision_processor(*, min_pixels: int = 28 * 28 * 4, max_pixels: int = 28 * 28 * 16) -> Any:
    """A ``Qwen2VLProcessor`` built in-process: a Qwen2-VL image processor (PIL backend, 14-pixel patches,
    2x2 merge) and a fresh copy of the tiny ChatML tokenizer with the vision tokens added, both with
    :data:`QWEN2_VL_TEMPLATE`, left padding (as TRL loads processors). A chart of 112x84 pixels becomes
    60 patches and 15 ``<|image_pad|>`` ids.

    A new processor per call (the tokenizer gains tokens): build one per test module. Without
    torchvision, transformers cannot check a video processor, so this processor has none (the
    subclass only drops the ``video_processor`` argument; images go through Qwen2VLProcessor's own code).
    """
    from transformers import Qwen2VLImageProcessorPil, Qwen2VLProcessor
    from transformers.processing_utils import ProcessorMixin

    class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):
        def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template: str | None = None, **kwargs: Any):
            self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    tokenizer = make_tokenizer.__wrapped__("chatml")  # a copy of its own: it gains the vision tokens
    tokenizer.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    tokenizer.chat_template = QWEN2_VL_TEMPLATE
    tokenizer.padding_side = "left"
    image_processor = Qwen2VLImageProcessorPil(min_pixels=min_pixels, max_pixels=max_pixels)
    return ImageOnlyQwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=QWEN2_VL_TEMPLATE)


def make_vision_model(processor: Any, *, seed: int = 0) -> PreTrainedModel:
    """A tiny random-weight ``Qwen2VLForConditionalGeneration`` for ``processor`` (text: hidden 64, 2
    layers; vision: 1 block of width 32). Weights depend only on ``seed``; a new model per call, in eval mode."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    tokenizer = processor.tokenizer
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in VISION_TOKENS}
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=4096, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(
            depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14, spatial_merge_size=2,
            temporal_patch_size=2, in_channels=3,
        ),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    model = _seeded_eval_model(Qwen2VLForConditionalGeneration, config, tokenizer, seed)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


class ScriptedPolicy:
    """A :class:`~gem_core.rollout.policy.Policy` that "samples" scripted texts.

    Each call encodes the next text (``add_special_tokens=False``) and appends the chat template's
    end-of-turn ids, exactly what a model that chose this text would emit. If the text does not fit in
    ``sampling.max_new_tokens`` it is cut there and the finish reason is ``"length"``.

    Args:
        tokenizer: the tokenizer the episode uses (its chat template defines end of turn).
        actions: a sequence of texts, one per turn (the turn is counted from the prompt, so one policy
            serves many concurrent episodes; past the end the last text repeats), or a function of the
            prompt ids that returns the text.

    Log-probabilities are :meth:`logprob_of` each token id: deterministic and varying with the id, so a
    test can check they stay aligned with the ids they belong to.

    Raises:
        InvalidArgument: if no action text is given.
    """

    def __init__(self, tokenizer: Tokenizer, actions: Sequence[str] | Callable[[list[int]], str]):
        from gem_core.rollout.chat_template import ChatTemplate

        if not callable(actions) and len(actions) == 0:
            raise InvalidArgument("ScriptedPolicy needs at least one action text.")
        self.tokenizer = tokenizer
        self.actions = actions
        self.chat_template = ChatTemplate.for_tokenizer(tokenizer)
        self.calls = 0

    @staticmethod
    def logprob_of(token_id: int) -> float:
        """The log-probability this policy reports for sampling ``token_id``."""
        return -((token_id % 89) + 1) / 16.0

    def _turn_index(self, prompt_ids: list[int]) -> int:
        marker = self.chat_template.generation_prompt_ids
        n = len(marker)
        count = sum(1 for i in range(len(prompt_ids) - n + 1) if prompt_ids[i : i + n] == marker)
        return max(count - 1, 0)

    def text_for(self, prompt_ids: list[int]) -> str:
        """The text this policy answers to ``prompt_ids``."""
        if callable(self.actions):
            return self.actions(list(prompt_ids))
        return self.actions[min(self._turn_index(prompt_ids), len(self.actions) - 1)]

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """The scripted reply for ``prompt_ids`` as token ids plus the end-of-turn ids, cut at
        ``sampling.max_new_tokens`` (then ``finish_reason`` is ``"length"``).
        """
        self.calls += 1
        text = self.text_for(prompt_ids)
        ids = list(self.tokenizer.encode(text, add_special_tokens=False)) + list(self.chat_template.end_of_turn_ids)
        finish_reason = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish_reason = ids[: sampling.max_new_tokens], "length"
        return Generation(token_ids=ids, logprobs=[self.logprob_of(t) for t in ids], finish_reason=finish_reason)


class EnvLifecycles:
    """Counts the envs :func:`gem_core.registry.make` built while installed, and how many are still open.

    Adapters must close every env they open (an MCP env leaks a server process otherwise); a test
    installs this, runs episodes through the framework's own code, and checks :attr:`open` is 0.
    """

    def __init__(self) -> None:
        self.made = 0
        self._open: set[int] = set()

    @property
    def open(self) -> int:
        """How many envs made since :meth:`install` are not closed yet."""
        return len(self._open)

    def install(self, monkeypatch: Any) -> EnvLifecycles:
        """Wrap ``gem_core.registry.make`` with pytest's ``monkeypatch`` (undone after the test)."""
        import gem_core.registry as registry

        real_make = registry.make

        def make(*args: Any, **kwargs: Any) -> Any:
            env = real_make(*args, **kwargs)
            self.made += 1
            self._open.add(id(env))
            real_close = env.close

            def close() -> None:
                self._open.discard(id(env))
                real_close()

            env.close = close
            return env

        monkeypatch.setattr(registry, "make", make)
        return self
