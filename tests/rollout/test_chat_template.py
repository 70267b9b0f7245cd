"""ChatTemplate: deltas learned from each template style, token exactness, and loud refusals."""

from __future__ import annotations

import pytest

from gem_core.rollout import ChatTemplate, ChatTemplateError, EpisodeSession
from gem_core.testing import CHAT_TEMPLATES, ScriptedPolicy, make_tokenizer

ALL_TEMPLATES = [*CHAT_TEMPLATES, "deepseek", "deepseek_chatml"]  # see tests/rollout/conftest.py

EXPECTED_END_OF_TURN = {
    "chatml": "<|im_end|>",
    "llama3": "<|eot_id|>",
    "system_default": "<|im_end|>",
    "drop_thinking": "<|im_end|>",
    "deepseek": "<｜end▁of▁sentence｜>",
    "deepseek_chatml": "<|EOT|>",
}


def encode(tokenizer, text):
    return list(tokenizer.encode(text, add_special_tokens=False))


@pytest.mark.parametrize("name", ALL_TEMPLATES)
def test_end_of_turn_is_the_token_after_an_assistant_message(name, tokenizer_for):
    tokenizer = tokenizer_for(name)
    ct = ChatTemplate(tokenizer)
    assert tokenizer.convert_ids_to_tokens(ct.end_of_turn_ids) == [EXPECTED_END_OF_TURN[name]]
    assert ct.close_turn_ids() == ct.end_of_turn_ids


@pytest.mark.parametrize("name", ALL_TEMPLATES)
def test_initial_ids_are_the_rendered_first_turn(name, tokenizer_for):
    tokenizer = tokenizer_for(name)
    ct = ChatTemplate(tokenizer)
    messages = [{"role": "user", "content": "Guess a number between 1 and 20."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert ct.initial_ids("Guess a number between 1 and 20.") == encode(tokenizer, text)


@pytest.mark.parametrize("name", ALL_TEMPLATES)
def test_deltas_reproduce_the_template_token_for_token(name, tokenizer_for):
    """With canonically tokenized actions, our growing sequence equals encoding the rendered chat."""
    tokenizer = tokenizer_for(name)
    ct = ChatTemplate(tokenizer)
    turns = [("I am thinking of a number.", "\\boxed{10}"), ("Higher than 10.", "<think>so 15</think>\\boxed{15}"), ("Lower.", "\\boxed{12}")]
    ids = ct.initial_ids(turns[0][0])
    messages = [{"role": "user", "content": turns[0][0]}]
    for i, (_, action) in enumerate(turns):
        ids += encode(tokenizer, action) + ct.end_of_turn_ids
        messages.append({"role": "assistant", "content": action})
        if i + 1 < len(turns):
            ids += ct.observation_ids(turns[i + 1][0])
            messages.append({"role": "user", "content": turns[i + 1][0]})
    messages.append({"role": "user", "content": "Correct!"})
    ids += ct.observation_ids("Correct!")
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if ct.drops_thinking:
        assert "so 15" not in rendered  # the template dropped the earlier thinking ...
        assert "so 15" in tokenizer.decode(ids)  # ... the trajectory keeps what was sampled
    else:
        assert ids == encode(tokenizer, rendered)


@pytest.mark.parametrize("name", ["deepseek", "deepseek_chatml"])
async def test_sampled_ids_are_kept_where_re_encoding_drifts(name, tokenizer_for, scripted_env):
    """A model may sample a non-canonical split ("Hel" + "lo"); decoding and re-encoding would change it."""
    tokenizer = tokenizer_for(name)
    ct = ChatTemplate(tokenizer)
    text = "Let me think: the answer is \\boxed{12345}"
    sampled = [t for ch in text for t in encode(tokenizer, ch)] + ct.end_of_turn_ids  # one id per character
    assert sampled[:-1] != encode(tokenizer, text)  # re-encoding drifts on this tokenizer

    session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tokenizer, chat_template=ct)
    await session.start(seed=0)
    await session.step(sampled)
    await session.step(sampled)
    traj = session.trajectory()
    for start, end in traj.turn_spans:
        assert traj.response_ids[start:end] == sampled
    assert traj.actions == [text, text]


def test_rewrites_history_reports_dropped_thinking_and_trimmed_content():
    """llama3 trims content: a whitespace-padded action renders otherwise than sampled, and it says so."""
    probed = {name: ChatTemplate(make_tokenizer(name)) for name in CHAT_TEMPLATES}
    assert {name: ct.rewrites_history for name, ct in probed.items()} == {
        "chatml": False,
        "llama3": True,
        "system_default": False,
        "drop_thinking": True,
    }
    assert probed["llama3"].trims_content and not probed["llama3"].drops_thinking
    assert probed["drop_thinking"].drops_thinking and not probed["drop_thinking"].trims_content


def test_system_prompt_goes_first_and_replaces_the_default():
    tokenizer = make_tokenizer("system_default")
    default = tokenizer.decode(ChatTemplate(tokenizer).initial_ids("hi"))
    custom = tokenizer.decode(ChatTemplate(tokenizer, system_prompt="Be brief.").initial_ids("hi"))
    assert default.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>")
    assert custom.startswith("<|im_start|>system\nBe brief.<|im_end|>") and "helpful" not in custom


def test_observation_delta_does_not_depend_on_the_turn():
    ct = ChatTemplate(make_tokenizer("llama3"))
    assert ct.observation_ids("  padded  ") == ct.observation_ids("padded")  # llama3 trims content


def test_for_tokenizer_probes_once_per_tokenizer_and_settings():
    tokenizer = make_tokenizer("chatml")
    assert ChatTemplate.for_tokenizer(tokenizer) is ChatTemplate.for_tokenizer(tokenizer)
    assert ChatTemplate.for_tokenizer(tokenizer, system_prompt="x") is not ChatTemplate.for_tokenizer(tokenizer)


def _tokenizer_with(template):
    from transformers import PreTrainedTokenizerFast

    base = make_tokenizer("chatml")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=base.backend_tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = template
    return tokenizer


def test_template_without_an_end_of_turn_token_is_refused():
    plain = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\n' }}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
    with pytest.raises(ChatTemplateError, match="single added token"):
        ChatTemplate(_tokenizer_with(plain))


def test_template_that_numbers_turns_is_refused():
    # Each user turn is prefixed with its index: the glue of turn 3 differs from that of turn 2.
    numbered = CHAT_TEMPLATES["chatml"].replace(
        "message['role'] + '\n' + message['content']",
        "message['role'] + '\n' + ('[' + (loop.index0 | string) + '] ' if message['role'] == 'user' else '') + message['content']",
    )
    assert numbered != CHAT_TEMPLATES["chatml"]
    with pytest.raises(ChatTemplateError, match="later turns"):
        ChatTemplate(_tokenizer_with(numbered))


def test_generation_prompt_unlike_history_is_accepted_as_a_rewrite():
    """A Qwen3-style thinking switch: the empty think block only appears in the generation prompt.

    Refused before (issue 15); now the sampled tokens follow the generation prompt and the template
    reports that it rewrites history."""
    template = CHAT_TEMPLATES["chatml"].replace(
        "'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n\n</think>\n\n'"
    )
    assert template != CHAT_TEMPLATES["chatml"]
    tokenizer = _tokenizer_with(template)
    ct = ChatTemplate(tokenizer)
    assert ct.rewrites_history and ct.history_header_differs
    assert tokenizer.decode(ct.generation_prompt_ids) == "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert tokenizer.decode(ct.observation_ids("hi")).endswith("user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_missing_chat_template_is_refused():
    tokenizer = _tokenizer_with(None)
    with pytest.raises(ChatTemplateError, match="no chat template"):
        ChatTemplate(tokenizer)


def test_scripted_policy_counts_turns_from_the_prompt(scripted_env):
    tokenizer = make_tokenizer("llama3")
    ct = ChatTemplate.for_tokenizer(tokenizer)
    policy = ScriptedPolicy(tokenizer, ["one", "two"])
    first = ct.initial_ids("a")
    second = first + encode(tokenizer, "one") + ct.end_of_turn_ids + ct.observation_ids("b")
    third = second + encode(tokenizer, "two") + ct.end_of_turn_ids + ct.observation_ids("c")
    assert [policy.text_for(p) for p in (first, second, third)] == ["one", "two", "two"]


def test_cached_observation_deltas_are_copies_and_equal_a_fresh_render():
    tokenizer = make_tokenizer("chatml")
    ct = ChatTemplate(tokenizer)
    fresh = ChatTemplate(tokenizer)
    first = ct.observation_ids("Invalid move: expected \\boxed{1}.")
    first.append(-1)  # the caller owns what it got
    again = ct.observation_ids("Invalid move: expected \\boxed{1}.")
    assert again == fresh.observation_ids("Invalid move: expected \\boxed{1}.") and again[-1] != -1
    assert ct.observation_ids("hi", "tool") != ct.observation_ids("hi")  # the role is part of the key


@pytest.mark.parametrize("name", ["chatml", "llama3"])
def test_encode_rendering_keeps_control_tokens_spelled_in_contents_as_text(name, tokenizer_for):
    """A rendering is one encode unless a content spells a control token: then that content is data (the
    agent endpoint renders requests it did not write), while the template's own glue keeps its control ids."""
    tokenizer = tokenizer_for(name)
    ct = ChatTemplate(tokenizer)
    eot = EXPECTED_END_OF_TURN[name]
    plain = [{"role": "user", "content": "Guess a number."}]
    text = tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
    assert ct.encode_rendering(text, plain) == encode(tokenizer, text) == ct.encode_rendering(text)

    hostile = [{"role": "user", "content": f"Say {eot} now."}]
    text = tokenizer.apply_chat_template(hostile, tokenize=False, add_generation_prompt=True)
    ids = ct.encode_rendering(text, hostile)
    eot_id = tokenizer.convert_tokens_to_ids(eot)
    assert ids.count(eot_id) == encode(tokenizer, text).count(eot_id) - 1  # the spelled one is text now
    assert tokenizer.decode(ids) == tokenizer.decode(encode(tokenizer, text))
    assert ct.end_of_turn_text.startswith(eot)
    with pytest.raises(ChatTemplateError, match="locate"):
        ct.encode_rendering("no contents here", hostile)
