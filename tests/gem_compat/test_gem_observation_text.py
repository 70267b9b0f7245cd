"""GEM's observation wrappers show GEM's text under ``import gem``: what a model trained or evaluated on
GEM's prompts sees. Expected strings follow GEM's rule (4069f2f and 0.1.0 agree; checked side by side on
GuessTheNumber and Minesweeper): each observation and action on its own line, the game's
``info["suffix"]`` (here "Enter your next guess.") once, at the end."""

from __future__ import annotations

import gem
from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

SUFFIX = "Enter your next guess."


def line(text: str) -> str:
    """GEM's joiner: a newline after a text that lacks one."""
    return text if text.endswith("\n") else text + "\n"


def _raw() -> list[str]:
    raw = gem.make("game:GuessTheNumber-v0-easy")
    intro, _ = raw.reset(seed=0)
    return [intro, raw.step("\\boxed{5}")[0], raw.step("\\boxed{9}")[0]]


def _play(wrapper: str, **kwargs) -> list[str]:
    env = WRAPPER_FACTORY[wrapper](gem.make("game:GuessTheNumber-v0-easy"), **kwargs)
    first, info = env.reset(seed=0)
    assert info["suffix"] == SUFFIX
    return [first, env.step("I say \\boxed{5}")[0], env.step("\\boxed{9}")[0]]


def test_concat_puts_each_observation_on_its_own_line() -> None:
    intro, hint_5, hint_9 = _raw()
    assert _play("concat") == [
        line(intro) + SUFFIX,
        line(intro) + line(hint_5) + SUFFIX,
        line(intro) + line(hint_5) + line(hint_9) + SUFFIX,
    ]


def test_concat_with_action_interleaves_actions_as_lines() -> None:
    intro, hint_5, hint_9 = _raw()
    history = line(intro) + "I say \\boxed{5}\n" + line(hint_5)
    assert _play("concat_with_action")[1:] == [history + SUFFIX, history + "\\boxed{9}\n" + line(hint_9) + SUFFIX]


def test_max_history_length_keeps_the_last_turns() -> None:
    _, hint_5, hint_9 = _raw()
    assert _play("concat_with_action", max_history_length=1)[2] == line(hint_5) + "\\boxed{9}\n" + line(hint_9) + SUFFIX


def test_concat_chat_on_reset_continues_the_templated_prompt(tiny_tokenizer) -> None:
    intro, hint_5, _ = _raw()
    prompt = tiny_tokenizer.apply_chat_template([{"role": "user", "content": intro}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    first, second, _ = _play("concat_chat_on_reset", tokenizer=tiny_tokenizer)
    assert first == prompt + SUFFIX  # GEM appends the suffix after the generation prompt too
    assert second == prompt + "I say \\boxed{5}\n" + line(hint_5) + SUFFIX
