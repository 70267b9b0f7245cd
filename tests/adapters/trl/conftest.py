"""A tiny GRPOTrainer on CPU, shared by the TRL adapter tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture
def grpo_config(tmp_path):
    from trl import GRPOConfig

    def build(**overrides):
        fields = dict(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
            bf16=False,
            use_vllm=False,
            gradient_checkpointing=False,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=96,
            max_steps=2,
            learning_rate=1e-3,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=0,
            temperature=1.0,
        )
        fields.update(overrides)
        return GRPOConfig(**fields)

    return build


@pytest.fixture
def fresh_model(tiny_tokenizer):
    """A model of its own per test: training changes the weights."""
    from gem_core.testing import make_model

    import copy

    return copy.deepcopy(make_model(tiny_tokenizer, seed=0))


# A Qwen-style template that renders tools, tool calls and tool results (written for these tests).
TOOL_TEMPLATE = (
    "{%- if tools %}{{ '<|im_start|>system\\nYou may call these tools:\\n' }}"
    "{%- for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{%- endfor %}"
    "{{ 'Call one as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{%- for call in message.get('tool_calls') or [] %}"
    "{{ '<tool_call>\\n' + {'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson + '\\n</tool_call>' }}"
    "{%- endfor %}{{ '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture
def tool_tokenizer(tiny_tokenizer):
    """``tiny_tokenizer`` with :data:`TOOL_TEMPLATE` and TRL's Qwen3 response template (tool calls parse)."""
    import copy

    from trl.chat_template_utils import qwen3_template

    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = TOOL_TEMPLATE
    tokenizer.response_template = qwen3_template
    return tokenizer


class TorchVarlenAttention:
    """``flash_attn_varlen_func`` in torch, for TRL's async trainer on CPU: causal attention per packed segment
    (bottom-right aligned, as flash-attention aligns a query block shorter than its keys), grouped-query heads
    repeated. TRL loads a flash-attention-3 GPU kernel from the Hub instead."""

    @staticmethod
    def flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale=None, causal=True, window_size=(-1, -1), **_):
        import torch
        import torch.nn.functional as F

        out = torch.empty_like(q)
        repeat = q.shape[1] // k.shape[1]
        for i in range(len(cu_q) - 1):
            qs, qe, ks, ke = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
            keys = k[ks:ke].repeat_interleave(repeat, dim=1).transpose(0, 1)
            values = v[ks:ke].repeat_interleave(repeat, dim=1).transpose(0, 1)
            mask = torch.ones(qe - qs, ke - ks, dtype=torch.bool).tril(diagonal=(ke - ks) - (qe - qs))
            out[qs:qe] = F.scaled_dot_product_attention(q[qs:qe].transpose(0, 1), keys, values, attn_mask=mask,
                                                        scale=softmax_scale).transpose(0, 1)
        return out


@pytest.fixture
def torch_varlen_attention():
    """:class:`TorchVarlenAttention`, what TRL's ``packing._flash_attn()`` returns on a GPU."""
    return TorchVarlenAttention
