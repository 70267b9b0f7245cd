"""One rule per episode option, the same in every adapter's config and in EpisodeSession."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.rollout import EpisodeSession
from gem_core.rollout.options import check_episode_options


@pytest.mark.parametrize("key", ["max_turns", "max_new_tokens", "max_total_tokens", "max_response_tokens"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_counts_are_positive_whole_numbers(key, bad):
    with pytest.raises(ValueError, match=rf"^MyConfig: {key}={bad!r} must be a positive whole number"):
        check_episode_options("MyConfig", **{key: bad})


@pytest.mark.parametrize("key", ["max_turns", "max_new_tokens"])
@pytest.mark.parametrize("good", [None, 1, 64, np.int64(3)])
def test_counts_accept_none_and_any_whole_number_type(key, good):
    check_episode_options("MyConfig", **{key: good})


@pytest.mark.parametrize("key", ["gamma", "reward_gamma"])
@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.9", None, True])
def test_a_discount_lies_in_0_1(key, bad):
    with pytest.raises(ValueError, match=rf"^MyConfig: {key}=.* must be a number in \[0, 1\]"):
        check_episode_options("MyConfig", **{key: bad})
    check_episode_options("MyConfig", **{key: 0.99})


def test_a_system_prompt_is_text():
    with pytest.raises(ValueError, match=r"^MyConfig: system_prompt=5 must be a str, or None"):
        check_episode_options("MyConfig", system_prompt=5)
    check_episode_options("MyConfig", system_prompt="Be brief.", max_turns=None)


def test_an_unknown_key_is_a_programming_error():
    with pytest.raises(TypeError, match="no rule for 'max_turn'"):
        check_episode_options("MyConfig", max_turn=3)


def test_the_session_checks_its_limits_by_the_same_rules(tiny_tokenizer, scripted_env):
    with pytest.raises(ValueError, match=r"^EpisodeSession: max_turns=2.5 must be a positive whole number"):
        EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, max_turns=2.5)
    with pytest.raises(ValueError, match=r"^EpisodeSession: max_total_tokens=0 must be a positive whole number"):
        EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, max_total_tokens=0)


@pytest.mark.parametrize("key", ["n_samples_per_prompt", "responses_per_prompt", "num_env"])
@pytest.mark.parametrize("bad", [0, -2, 1.5, None, "4"])
def test_episode_counts_are_positive_whole_numbers_and_never_none(key, bad):
    with pytest.raises(ValueError, match=rf"^MyConfig: {key}={bad!r} must be a positive whole number\.$"):
        check_episode_options("MyConfig", **{key: bad})
    check_episode_options("MyConfig", **{key: np.int64(8)})


@pytest.mark.parametrize(
    "field, bad",
    [
        ("max_turns", 0),
        ("max_turns", 2.5),
        ("max_total_tokens", 0),
        ("max_response_tokens", "4096"),
        ("system_prompt", 5),
        ("history", "as_written"),
        ("chat_template_kwargs", {1: True}),
        ("record_env_states", "yes"),
    ],
)
def test_episode_options_refuse_each_bad_field_by_name(field, bad):
    from gem_core.errors import GemError
    from gem_core.rollout import EpisodeOptions

    with pytest.raises(GemError, match=rf"^EpisodeOptions: {field}={bad!r} must be") as caught:
        EpisodeOptions(**{field: bad})
    assert isinstance(caught.value, ValueError)


def test_episode_options_are_checked_again_when_replaced_and_normalize_numpy_ints():
    import dataclasses

    from gem_core.rollout import EpisodeOptions

    options = EpisodeOptions(max_turns=np.int64(4), max_total_tokens=np.int64(512))
    assert type(options.max_turns) is int and type(options.max_total_tokens) is int
    with pytest.raises(ValueError, match=r"^EpisodeOptions: max_turns=0 "):
        dataclasses.replace(options, max_turns=0)


async def test_a_session_from_options_equals_one_from_the_old_keywords(tiny_tokenizer, scripted_env):
    """options=EpisodeOptions(...) and the keywords build the same session, and play the same trajectory."""
    from gem_core.rollout import EpisodeOptions

    keywords = dict(max_turns=2, max_total_tokens=400, max_response_tokens=300, system_prompt="Be brief.",
                    history="as_rendered", chat_template_kwargs={"x": 1}, record_env_states=True)
    trajectories = []
    for kwargs in (keywords, {"options": EpisodeOptions(**keywords)}):
        session = EpisodeSession(scripted_env(rewards=[0.0, 0.5, 1.0]), tiny_tokenizer, **kwargs)
        assert session.options == EpisodeOptions(**keywords)
        assert (session.max_turns, session.max_total_tokens, session.max_response_tokens, session.history, session.record_env_states) == (
            2, 400, 300, "as_rendered", True)
        assert session.chat_template.system_prompt == "Be brief." and session.chat_template.chat_template_kwargs == {"x": 1}
        await session.start(seed=3)
        while not session.done:
            await session.step(action_text="a")
        trajectories.append(session.trajectory())
    assert trajectories[0] == trajectories[1] and trajectories[0].metrics["truncated_by"] == "max_turns"


def test_options_and_the_same_keywords_together_are_refused(tiny_tokenizer, scripted_env):
    from gem_core.errors import GemError
    from gem_core.rollout import EpisodeOptions

    with pytest.raises(GemError, match=r"^EpisodeSession: got options= and also max_turns=3; set them on the options"):
        EpisodeSession(scripted_env(), tiny_tokenizer, options=EpisodeOptions(max_turns=2), max_turns=3)
    with pytest.raises(TypeError, match="options must be an EpisodeOptions"):
        EpisodeSession(scripted_env(), tiny_tokenizer, options={"max_turns": 2})


async def test_run_episodes_checks_the_options_once_before_any_env_and_passes_them_down(tiny_tokenizer, scripted_env):
    from gem_core.rollout import EpisodeOptions, run_episodes
    from gem_core.testing import ScriptedPolicy

    built = []

    def factory():
        built.append(1)
        return scripted_env(rewards=[0.0] * 5)

    with pytest.raises(ValueError, match=r"^run_episodes: max_turns=0 "):
        await run_episodes(factory, ScriptedPolicy(tiny_tokenizer, ["a"]), tiny_tokenizer, [1], max_turns=0)
    assert built == []
    by_options = await run_episodes(factory, ScriptedPolicy(tiny_tokenizer, ["a"]), tiny_tokenizer, [1, 2],
                                    options=EpisodeOptions(max_turns=2, system_prompt="Be brief."))
    by_keywords = await run_episodes(factory, ScriptedPolicy(tiny_tokenizer, ["a"]), tiny_tokenizer, [1, 2], max_turns=2, system_prompt="Be brief.")
    assert by_options == by_keywords and [t.num_turns for t in by_options] == [2, 2]


async def test_run_labels_sets_each_labels_system_prompt_on_the_options(tiny_tokenizer):
    from gem_core.rollout import EpisodeOptions, run_labels
    from gem_core.testing import ScriptedPolicy

    labels = [{"env_id": "game:GuessTheNumber-v0", "seed": 0}, {"env_id": "game:GuessTheNumber-v0", "seed": 1}]
    policy = ScriptedPolicy(tiny_tokenizer, ["\\boxed{1}"])
    trajectories = await run_labels(labels, policy, tiny_tokenizer, system_prompts=["Be brief.", None], options=EpisodeOptions(max_turns=1))
    assert [t.num_turns for t in trajectories] == [1, 1] and trajectories[0].metrics["truncated_by"] == "max_turns"
    assert "Be brief." in tiny_tokenizer.decode(trajectories[0].prompt_ids)
    assert "Be brief." not in tiny_tokenizer.decode(trajectories[1].prompt_ids)
