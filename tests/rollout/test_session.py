"""EpisodeSession (driven mode): token bookkeeping, limits and env errors."""

from __future__ import annotations

import numpy as np
import pytest

from gem_core.errors import InvalidArgument
from gem_core.rollout import ChatTemplate, EpisodeSession, SamplingParams
from gem_core.testing import ScriptedPolicy


def encode(tokenizer, text):
    return list(tokenizer.encode(text, add_special_tokens=False))


async def test_step_appends_sampled_ids_then_observation_delta(tiny_tokenizer, scripted_env):
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer)
    prompt = await session.start(seed=3)
    assert prompt == ct.initial_ids("start 3")

    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    step = await session.step(action, logprobs=[-0.5] * len(action))
    assert step.observation == "feedback 1 on \\boxed{7}"
    assert step.observation_ids == ct.observation_ids(step.observation)
    assert session.context_ids == prompt + action + step.observation_ids
    assert not step.done and step.reward == 0.0

    step2 = await session.step(action, logprobs=[-0.25] * len(action))
    assert step2.done and step2.terminated and step2.observation_ids == []
    traj = session.trajectory()
    assert traj.rewards == [0.0, 1.0]
    assert traj.response_ids == action + step.observation_ids + action
    assert traj.loss_mask == [1] * len(action) + [0] * len(step.observation_ids) + [1] * len(action)
    assert traj.logprobs == [-0.5] * len(action) + [0.0] * len(step.observation_ids) + [-0.25] * len(action)
    n, m = len(action), len(step.observation_ids)
    assert traj.turn_spans == [(0, n), (n + m, 2 * n + m)]
    assert traj.actions == ["\\boxed{7}", "\\boxed{7}"]
    assert traj.observations == ["start 3", "feedback 1 on \\boxed{7}"]
    assert traj.final_observation == "feedback 2 on \\boxed{7}"
    assert traj.terminated and not traj.truncated


async def test_turn_cut_by_length_is_closed_with_mask_zero_tokens(tiny_tokenizer, scripted_env):
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(rewards=[0.0, 0.0]), tiny_tokenizer)
    await session.start(seed=0)
    cut = encode(tiny_tokenizer, "the quick brown")
    step = await session.step(cut, logprobs=[-1.0] * len(cut), finish_reason="length")
    traj = session.trajectory()
    close = ct.close_turn_ids()
    assert traj.response_ids[: len(cut) + len(close)] == cut + close
    assert traj.loss_mask[: len(cut) + len(close)] == [1] * len(cut) + [0] * len(close)
    assert traj.turn_spans[0] == (0, len(cut))
    assert traj.response_ids[len(cut) + len(close) :] == step.observation_ids
    assert traj.actions == ["the quick brown"]


async def test_action_text_is_decoded_without_special_tokens(tiny_tokenizer, scripted_env):
    env = scripted_env(rewards=[1.0])
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(env, tiny_tokenizer)
    await session.start()
    await session.step(encode(tiny_tokenizer, "<think>hm</think> \\boxed{2}") + ct.end_of_turn_ids)
    assert env.actions_seen == ["<think>hm</think> \\boxed{2}"]


async def test_text_mode_counts_end_of_turn_as_sampled(tiny_tokenizer, scripted_env):
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer)
    await session.start()
    await session.step(action_text="\\boxed{4}")
    traj = session.trajectory()
    assert traj.response_ids == encode(tiny_tokenizer, "\\boxed{4}") + ct.end_of_turn_ids
    assert traj.loss_mask == [1] * len(traj.response_ids)
    assert traj.metrics["has_logprobs"] is False


async def test_max_turns_truncates(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(rewards=[0.0] * 10), tiny_tokenizer, max_turns=2)
    await session.start()
    assert not (await session.step(action_text="a")).done
    step = await session.step(action_text="b")
    assert step.done and step.truncated and not step.terminated
    assert step.info["truncated_by"] == "max_turns"
    traj = session.trajectory()
    assert traj.truncated and traj.num_turns == 2 and traj.metrics["truncated_by"] == "max_turns"


async def test_max_response_tokens_bounds_the_response_alone(tiny_tokenizer, scripted_env):
    async def response_length(**bound) -> int:
        # A long system prompt makes the prompt alone close to the limit.
        session = EpisodeSession(scripted_env(rewards=[0.0] * 50), tiny_tokenizer, system_prompt="play well " * 20, **bound)
        policy = ScriptedPolicy(tiny_tokenizer, ["the quick brown fox jumps over the lazy dog"])
        await session.start()
        while not session.done:
            gen = await policy.generate(session.context_ids, SamplingParams(max_new_tokens=session.generation_budget(256)))
            await session.step(gen.token_ids, logprobs=gen.logprobs, finish_reason=gen.finish_reason)
        traj = session.trajectory()
        assert traj.truncated and traj.metrics["truncated_by"] == "max_total_tokens"
        return len(traj.prompt_ids), len(traj.response_ids)

    limit = 80
    prompt, response = await response_length(max_response_tokens=limit)
    assert response <= limit < prompt + response and response > 0  # the prompt is not counted
    _, response = await response_length(max_total_tokens=limit)
    assert response == 0  # as a total bound, the same number leaves this prompt no room at all


async def test_max_total_tokens_is_never_exceeded(tiny_tokenizer, scripted_env):
    limit = 60
    session = EpisodeSession(scripted_env(rewards=[0.0] * 50), tiny_tokenizer, max_total_tokens=limit)
    policy = ScriptedPolicy(tiny_tokenizer, ["the quick brown fox jumps over the lazy dog"])
    await session.start()
    while not session.done:
        budget = session.generation_budget(256)
        assert budget >= 1
        gen = await policy.generate(session.context_ids, SamplingParams(max_new_tokens=budget))
        await session.step(gen.token_ids, logprobs=gen.logprobs, finish_reason=gen.finish_reason)
        assert session.num_tokens <= limit
    traj = session.trajectory()
    assert traj.truncated and traj.metrics["truncated_by"] == "max_total_tokens"
    assert len(traj.prompt_ids) + len(traj.response_ids) <= limit


async def test_action_longer_than_budget_is_clipped(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(rewards=[0.0]), tiny_tokenizer, max_total_tokens=30)
    prompt = await session.start()
    long_action = encode(tiny_tokenizer, "the quick brown fox jumps over the lazy dog " * 5)
    step = await session.step(long_action)
    traj = session.trajectory()
    assert len(prompt) + len(traj.response_ids) <= 30
    assert step.info["action_clipped"] is True
    assert traj.response_ids[-1:] == ChatTemplate.for_tokenizer(tiny_tokenizer).close_turn_ids()


async def test_prompt_that_fills_the_budget_ends_the_session_at_once(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(), tiny_tokenizer, max_total_tokens=3)
    await session.start()
    assert session.done
    traj = session.trajectory()
    assert traj.truncated and traj.num_turns == 0


async def test_env_error_becomes_truncation_with_info(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(rewards=[0.0] * 5, fail_on_turn=2), tiny_tokenizer)
    await session.start()
    await session.step(action_text="a")
    step = await session.step(action_text="b")
    assert step.done and step.truncated and step.reward == 0.0
    assert "tool crashed" in step.info["error"]
    traj = session.trajectory()
    assert traj.metrics["env_error_turns"] == 1 and traj.metrics["truncated_by"] == "error"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5"])
async def test_a_reward_that_is_not_a_finite_number_is_an_env_error_not_a_poisoned_batch(tiny_tokenizer, scripted_env, bad):
    """One NaN reward normalized with the batch's returns would make every advantage NaN; the trajectory
    refuses it, so the session must not record it: the episode ends as an env error, reward 0."""
    session = EpisodeSession(scripted_env(rewards=[0.5, bad, 1.0]), tiny_tokenizer)
    await session.start()
    await session.step(action_text="a")
    step = await session.step(action_text="b")
    assert step.done and step.truncated and step.reward == 0.0
    assert "reward" in step.info["error"] and "finite" in step.info["error"], step.info
    traj = session.trajectory()
    assert traj.rewards == [0.5, 0.0] and traj.metrics["truncated_by"] == "error"


async def test_a_state_the_env_cannot_snapshot_ends_the_episode_not_the_rollout(tiny_tokenizer, scripted_env):
    """record_env_states: get_state raising (a terminal tree too long to copy) truncates with info["error"]."""

    class Unsnapshottable(scripted_env):
        def get_state(self):
            if self.turn >= 1:
                raise ValueError("a path of 4000 characters is too long to snapshot")
            return {"turn": self.turn}

    session = EpisodeSession(Unsnapshottable(rewards=[0.0] * 5), tiny_tokenizer, record_env_states=True)
    await session.start()
    await session.step(action_text="a")
    step = await session.step(action_text="b")
    assert step.done and step.truncated and step.reward == 0.0
    assert "too long to snapshot" in step.info["error"]
    traj = session.trajectory()
    assert traj.metrics["truncated_by"] == "error" and len(traj.actions) == 2 and traj.env_states == []


async def test_step_before_start_or_after_done_raises(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer)
    with pytest.raises(RuntimeError, match="start"):
        await session.step(action_text="a")
    await session.start()
    await session.step(action_text="a")
    with pytest.raises(RuntimeError, match="over"):
        await session.step(action_text="a")


async def test_logprobs_must_match_action_ids(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(), tiny_tokenizer)
    await session.start()
    with pytest.raises(ValueError, match="logprobs"):
        await session.step([5, 6, 7], logprobs=[-1.0])


@pytest.mark.parametrize("bad", [[-1], [5, -3, 6], [2**70]])
async def test_ids_the_tokenizer_cannot_decode_are_refused_and_the_episode_goes_on(tiny_tokenizer, scripted_env, bad):
    """A negative id from an engine raised the tokenizer's OverflowError out of step() (RL2's generate, every episode of
    the gather): now InvalidArgument naming the ids, with nothing recorded, so a valid turn still follows."""
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(), tiny_tokenizer)
    await session.start()
    with pytest.raises(InvalidArgument, match="cannot decode"):
        await session.step(bad)
    assert session.num_turns == 0
    good = await session.step(tiny_tokenizer.encode("\\boxed{1}", add_special_tokens=False) + ct.end_of_turn_ids)
    assert session.num_turns == 1 and good.observation


async def test_system_prompt_is_in_the_prompt(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(), tiny_tokenizer, system_prompt="Be brief.")
    prompt = await session.start(seed=1)
    assert tiny_tokenizer.decode(prompt).startswith("<|im_start|>system\nBe brief.<|im_end|>")


async def test_restart_resets_the_books(tiny_tokenizer, scripted_env):
    session = EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer)
    await session.start(seed=1)
    await session.step(action_text="a")
    prompt = await session.start(seed=2)
    assert session.context_ids == prompt and not session.done
    assert session.trajectory().num_turns == 0 and session.trajectory().seed == 2


async def test_aborted_generation_ends_the_episode_without_stepping_the_env(tiny_tokenizer, scripted_env):
    env = scripted_env(rewards=[0.0, 1.0])
    session = EpisodeSession(env, tiny_tokenizer)
    await session.start()
    step = await session.step(encode(tiny_tokenizer, "half"), finish_reason="abort")
    assert step.done and step.truncated and step.info["truncated_by"] == "abort"
    assert env.actions_seen == []
    traj = session.trajectory()
    assert traj.num_turns == 1 and traj.rewards == [0.0] and traj.metrics["truncated_by"] == "abort"


def test_a_label_whose_env_kwargs_the_env_refuses_names_them_and_the_registered_ones(tiny_tokenizer):
    """An adapter's hook builds its episode from a dataset row's label: a kwarg the env does not take is the
    dataset's mistake, named as make_dataset names it, not the constructor's bare TypeError."""
    from gem_core.rows import EnvKwargsError

    label = {"env_id": "game:GuessTheNumber-v0", "seed": 0, "env_kwargs": {"bogus": 1}}
    with pytest.raises(EnvKwargsError, match=r'env_kwargs \{"bogus": 1\} do not fit game:GuessTheNumber-v0 .*and max_turns'):
        EpisodeSession.from_label(label, tiny_tokenizer)


async def test_per_token_columns_of_turns_with_and_without_logprobs_and_versions(tiny_tokenizer, scripted_env):
    """The session keeps log-probs and versions per turn and lays them out per token in trajectory() (issue 46):
    a turn with log-probs and one version, a turn with neither, a cut turn with one version per id."""
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(rewards=[0.0, 0.0, 1.0]), tiny_tokenizer)
    await session.start(seed=1)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    cut = encode(tiny_tokenizer, "\\boxed{8}")
    first = await session.step(action, logprobs=[-0.5] * len(action), versions=3)
    assert session.trajectory().token_versions == [3] * len(action) + [-1] * len(first.observation_ids)
    second = await session.step(action)
    assert session.trajectory().token_versions == [3] * len(action) + [-1] * (len(first.observation_ids) + len(action) + len(second.observation_ids))
    third = await session.step(cut, logprobs=[-0.25] * len(cut), finish_reason="length", versions=list(range(len(cut))))
    assert third.done
    traj = session.trajectory()
    n, o1, o2, c, e = len(action), len(first.observation_ids), len(second.observation_ids), len(cut), len(ct.end_of_turn_ids)
    assert traj.response_ids == action + first.observation_ids + action + second.observation_ids + cut + ct.close_turn_ids()
    assert traj.loss_mask == [1] * n + [0] * o1 + [1] * n + [0] * o2 + [1] * c + [0] * e
    assert traj.logprobs == [-0.5] * n + [0.0] * (o1 + n + o2) + [-0.25] * c + [0.0] * e
    assert traj.token_versions == [3] * n + [-1] * (o1 + n + o2) + list(range(c)) + [-1] * e
    assert traj.metrics["has_logprobs"] is False and traj.metrics["num_sampled_tokens"] == 2 * n + c
    assert session.oldest_version == 0 and traj.oldest_version == 0


@pytest.mark.parametrize("versions", [True, 2.9, [2.9, 2.9], "77", np.array([1.5, 1.5]), [False, True]],
                         ids=["bool", "float", "floats", "text", "float array", "bools"])
async def test_versions_that_are_not_whole_numbers_are_refused_naming_the_argument(tiny_tokenizer, scripted_env, versions):
    """``versions`` is one int for the turn or one per id: bools, floats and text were truncated or parsed into versions
    (2.9 -> 2, "77" -> [7, 7]) and a float for the turn raised a bare TypeError; action ids refuse all of them."""
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer)
    await session.start(seed=1)
    action = (encode(tiny_tokenizer, "x") + ct.end_of_turn_ids)[:2]
    assert len(action) == 2
    with pytest.raises(InvalidArgument, match="versions"):
        await session.step(action, versions=versions)
    await session.step(action, versions=np.array([4, 5]))  # numpy ints are ints
    assert session.oldest_version == 4


async def test_a_non_blocking_env_steps_inline_but_an_env_with_its_own_astep_is_awaited(tiny_tokenizer):
    """The session skips Env.astep's coroutine for a non-blocking env (issue 46) and must still await an
    astep the env replaced, also on the instance."""
    import gem_core

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    env = gem_core.make("game:GuessTheNumber-v0")
    assert not env.blocking
    session = EpisodeSession(env, tiny_tokenizer)
    await session.start(seed=0)
    first = await session.step(action)  # inline: the game's own answer
    assert "error" not in first.info and first.observation.startswith("Turns left: ")
    assert session.trajectory().actions == ["\\boxed{7}"]

    async def own_astep(text):
        return f"own astep saw {text}", 0.5, False, False, {}

    env.astep = own_astep
    step = await session.step(action)
    assert step.observation == "own astep saw \\boxed{7}" and step.reward == 0.5


async def test_logprobs_of_any_sequence_type_and_text_mode_and_per_episode_counts(tiny_tokenizer, scripted_env):
    """step() checks one log-prob per id inline and leaves the rest to _action_logprobs; trajectory() counts format
    errors, env errors and sampled tokens in one pass (issue 46): log-probs as a numpy array become floats, a text
    action's log-probs without its end-of-turn ids get 0.0 there, a mismatch still raises, and the counts hold."""
    import numpy as np

    class Flagging(scripted_env):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated, truncated, {**info, "format_error": self.turn == 1, **({"error": "x"} if self.turn == 2 else {})}

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(Flagging(rewards=[0.0, 0.0, 1.0]), tiny_tokenizer)
    await session.start(seed=1)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    await session.step(np.array(action), logprobs=np.full(len(action), -0.5, dtype=np.float32))
    content = encode(tiny_tokenizer, "\\boxed{8}")
    await session.step(action_text="\\boxed{8}", logprobs=[-0.25] * len(content))
    with pytest.raises(ValueError, match=f"Got {len(action)} action ids but 1 logprobs"):
        await session.step(action, logprobs=[-1.0])
    await session.step(action, logprobs=[-0.125] * len(action))
    traj = session.trajectory()
    (s0, e0), (s1, e1), (s2, e2) = traj.turn_spans
    assert traj.logprobs[s0:e0] == [-0.5] * len(action) and all(type(x) is float for x in traj.logprobs)
    assert traj.logprobs[s1:e1] == [-0.25] * len(content) + [0.0] * len(ct.end_of_turn_ids)
    assert traj.logprobs[s2:e2] == [-0.125] * len(action) and traj.metrics["has_logprobs"] is True
    assert traj.metrics["format_errors"] == 1 and traj.metrics["env_error_turns"] == 1
    assert traj.metrics["num_sampled_tokens"] == sum(e - s for s, e in traj.turn_spans) == 2 * len(action) + e1 - s1


async def test_action_ids_are_integers_of_any_kind_and_anything_else_is_refused_by_name(tiny_tokenizer, scripted_env):
    """step() takes numpy and torch integer ids as ints (issue 46: operator.index, half int()'s cost per id); a float or
    a text id is refused with the types named, where int() truncated 7.9 to token 7 and read "12" as token 12."""
    import numpy as np
    import torch

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    for ids in (np.array(action), torch.tensor(action), [np.int64(i) for i in action]):
        session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer, chat_template=ct)
        await session.start(seed=1)
        await session.step(ids)
        (start, end), = session.trajectory().turn_spans
        response = session.trajectory().response_ids
        assert response[start:end] == action and all(type(i) is int for i in response)
    for bad, named in (([float(i) + 0.9 for i in action], "float"), ([str(i) for i in action], "str"), (7, "a value of type int"), (iter([7.5]), "a value of type list_iterator"),
                       (torch.tensor(action, dtype=torch.float32), "Tensor")):
        session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer, chat_template=ct)
        await session.start(seed=1)
        with pytest.raises(ValueError, match=f"integer action_ids; got .*{named}"):
            await session.step(bad)
        assert session.num_turns == 0 and session.num_tokens == len(session.context_ids)


async def test_a_session_step_record_pickles_and_copies(tiny_tokenizer, scripted_env):
    """SessionStep is a slotted dataclass (no per-turn dict, issue 46): it still pickles, copies and compares."""
    import copy
    import pickle

    session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer)
    await session.start(seed=1)
    step = await session.step(action_text="a")
    assert pickle.loads(pickle.dumps(step)) == step == copy.deepcopy(step)
    assert step.observation_ids and step.info == {"turn": 1}


async def test_a_trajectory_is_unchanged_by_the_sessions_next_episodes(tiny_tokenizer):
    """The session clears its books in place for each episode (issue 46: lists that live as long as the session stay
    out of the garbage collector's young collections); what trajectory() and step() handed out must not change."""
    import copy

    import gem_core

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(gem_core.make("game:GuessTheNumber-v0"), tiny_tokenizer, chat_template=ct)
    kept, snapshots = [], []
    for seed in range(3):
        prompt = await session.start(seed=seed)
        steps = []
        for guess in (seed + 1, seed + 5, seed + 2, 9 - seed):  # each episode its own actions and answers
            if session.done:
                break
            steps.append(await session.step(encode(tiny_tokenizer, f"\\boxed{{{guess}}}") + ct.end_of_turn_ids, logprobs=None))
        trajectory = session.trajectory()
        kept.append((prompt, steps, trajectory))
        snapshots.append(copy.deepcopy((prompt, [s.observation_ids for s in steps], trajectory)))
    assert [(p, [s.observation_ids for s in steps], t) for p, steps, t in kept] == snapshots
    assert len({id(t.response_ids) for _, _, t in kept}) == 3


async def test_the_context_read_every_turn_or_never_is_the_same_and_a_step_s_ids_are_the_callers(tiny_tokenizer):
    """A turn adds its ids as pieces that the books' one list takes in only when the context is read (issue 46: a
    driven episode, whose framework keeps the context, never grows that list turn by turn). Read after every turn (drive
    mode) or never before the trajectory, the sequence is the same; and a step's observation_ids are the caller's to
    change: the books keep the template's shared tuple, which no caller's change may reach."""
    import gem_core

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    moves = [("\\boxed{5}", "stop"), ("the quick", "length"), ("\\boxed{2}", "stop"), ("\\boxed{8}", "stop")]

    async def play(read_every_turn: bool):
        session = EpisodeSession(gem_core.make("game:GuessTheNumber-v0"), tiny_tokenizer, chat_template=ct)
        contexts = [list(session.borrow_context_ids()) for _ in [await session.start(seed=4)]]
        for text, finish in moves:
            if session.done:
                break
            ids = encode(tiny_tokenizer, text) + (ct.end_of_turn_ids if finish == "stop" else [])
            step = await session.step(ids, logprobs=[-0.5] * len(ids), finish_reason=finish)
            step.observation_ids.append(999_999)  # the caller's list
            if read_every_turn:
                contexts.append(list(session.borrow_context_ids()))
        return session, contexts

    every, contexts = await play(read_every_turn=True)
    never, _ = await play(read_every_turn=False)
    first, last = every.trajectory(), never.trajectory()
    assert first == last and 999_999 not in first.response_ids
    # Before each turn the policy read the sequence up to that turn's start; after the last, all of it.
    reads = [0] + [start for start, _ in first.turn_spans[1:]] + [len(first.response_ids)]
    assert contexts == [first.prompt_ids + first.response_ids[:n] for n in reads]
    assert never.context_ids == last.prompt_ids + last.response_ids and never.num_tokens == len(never.context_ids)
    assert 999_999 not in ct.observation_ids(first.observations[1])  # the template's cached delta is untouched


async def test_a_turn_leaves_the_garbage_collector_no_object_to_track(tiny_tokenizer, scripted_env):
    """What the books keep of a turn until the episode ends is not tracked by the garbage collector (issue 46): with
    hundreds of sessions in flight each tracked object a turn keeps reaches the oldest generation, and the full
    collections, which traverse every object of the process, come as often as objects reach it. Log-probs and
    versions are kept as tuples (of floats, of ints), which the collector stops tracking at its first pass."""
    import gc

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    session = EpisodeSession(scripted_env(rewards=[0.0] * 40, observations=["same"]), tiny_tokenizer, chat_template=ct)
    await session.start(seed=1)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids

    async def tracked_after(turns: int) -> int:
        for _ in range(turns):
            await session.step(action, logprobs=[-0.5] * len(action), versions=[2] * len(action))
        gc.collect()
        return len(gc.get_objects())

    before = await tracked_after(5)  # the template's caches and the env's first answers are made by now
    grown = await tracked_after(20) - before
    assert grown < 10, f"20 turns left {grown} more objects tracked by the garbage collector"
    assert session.trajectory().logprobs.count(-0.5) == 25 * len(action)


def _values_inline(obj: object) -> bool:
    """CPython 3.11's layout: an instance whose attribute values live inline holds a pointer to them four words
    before the object, and no dict three words before it."""
    import ctypes

    values, managed_dict = (ctypes.c_void_p.from_address(id(obj) - k * ctypes.sizeof(ctypes.c_void_p)).value for k in (4, 3))
    return bool(values) and not managed_dict


async def test_sessions_share_their_attribute_names_and_keep_the_values_inline(tiny_tokenizer, scripted_env):
    """Every session, however it was made (plain, every option, from a label, with a vision processor), sets the same
    attributes, all in __init__, at most 27 of them (issue 46). CPython then shares the names among all sessions and
    keeps each session's values inline; with 38 names, or one first set by start() or from_label(), each of hundreds of
    sessions in flight had a dict of its own, scattered in memory and read through a slower path every turn. 27 leaves
    room: each constructor that raises before the first session is made takes one of the 29 places CPython offers.
    The layout itself is checked where it is known (CPython 3.11), on a fresh subclass per way, so what the process
    made before (other tests' sessions) does not decide it."""
    import sys

    from gem_core.testing import make_vision_processor

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    ways = {
        "plain": lambda cls: cls(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer, chat_template=ct),
        "every option": lambda cls: cls(
            scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer, chat_template=ct, max_turns=5, max_total_tokens=4096,
            max_response_tokens=2048, history="as_rendered", record_env_states=True, env_id="scripted",
        ),
        "from a label": lambda cls: cls.from_label({"env_id": "game:GuessTheNumber-v0", "seed": 3}, tiny_tokenizer),
        "vision": lambda cls: cls(scripted_env(rewards=[0.0, 1.0]), make_vision_processor()),
    }
    names_of_ways = {}
    for way, make in ways.items():
        fresh = type("FreshSession", (EpisodeSession,), {})
        sessions = [make(fresh) for _ in range(4)]
        names_made = [set(vars(s)) for s in sessions[2:]]  # vars() makes a dict: only the last two are looked into
        for session in sessions:
            for _ in range(2):  # two episodes: start, turns (with and without log-probs), the trajectory
                await session.start(seed=1)
                ids = action if session.image_encoder is None else encode(session.tokenizer, "\\boxed{7}") + session.chat_template.end_of_turn_ids
                await session.step(ids, logprobs=[-0.5] * len(ids))
                if not session.done:
                    await session.step(ids)
                session.trajectory()
        if sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11):
            assert all(_values_inline(s) for s in sessions[:2]), f"{way}: a session's attribute values are not inline"
        names = [set(vars(s)) for s in sessions[2:]]
        assert names == names_made, f"{way}: attributes first set after __init__: {names[0] - names_made[0]}"
        names_of_ways[way] = names[0]
    assert all(names == names_of_ways["plain"] for names in names_of_ways.values()), names_of_ways
    assert len(names_of_ways["plain"]) <= 27, sorted(names_of_ways["plain"])


async def test_a_start_whose_reset_raises_leaves_the_session_not_started(tiny_tokenizer, scripted_env):
    """Whether a session has started is whether it holds the episode's first observation (issue 46 made it so, to keep
    a session's attributes few): a second start() whose env reset raises leaves a session that refuses step() and
    fork() with ResetNeeded, where the flag kept from the first episode let step() run on cleared books."""
    from gem_core.errors import ResetNeeded

    class FailingSecondReset(scripted_env):
        resets = 0

        def reset(self, *, seed=None, options=None):
            self.resets += 1
            if self.resets == 2:
                raise RuntimeError("reset crashed")
            return super().reset(seed=seed, options=options)

    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    action = encode(tiny_tokenizer, "\\boxed{7}") + ct.end_of_turn_ids
    session = EpisodeSession(FailingSecondReset(rewards=[1.0]), tiny_tokenizer, chat_template=ct)
    await session.start(seed=1)
    assert (await session.step(action)).done
    with pytest.raises(RuntimeError, match="reset crashed"):
        await session.start(seed=2)
    with pytest.raises(ResetNeeded, match="before `step`"):
        await session.step(action)
    with pytest.raises(ResetNeeded, match="before `fork`"):
        session.fork(2)
    await session.start(seed=3)  # the env resets again: the session plays on
    assert (await session.step(action)).reward == 1.0 and session.trajectory().seed == 3


@pytest.mark.parametrize("bad", [None, {"text": "hi"}, 7])
async def test_an_observation_that_is_not_text_is_named_as_the_env_s(tiny_tokenizer, scripted_env, bad):
    """A step's None observation ended the episode with the chat template's "'dict object' has no attribute
    'content'", and a reset's with the same error out of start(): neither named the env's answer."""
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)

    class BadStep(scripted_env):
        def step(self, action):
            _, reward, terminated, truncated, info = super().step(action)
            return bad, reward, terminated, truncated, info

    session = EpisodeSession(BadStep(rewards=[0.0, 1.0]), tiny_tokenizer, chat_template=ct)
    await session.start(seed=1)
    step = await session.step(encode(tiny_tokenizer, "a") + ct.end_of_turn_ids)
    assert step.truncated and "the env's observation is a" in step.info["error"]

    class BadReset(scripted_env):
        def reset(self, *, seed=None, options=None):
            return bad, {}

    with pytest.raises(InvalidArgument, match="the env's reset returned"):
        await EpisodeSession(BadReset(), tiny_tokenizer, chat_template=ct).start(seed=1)
