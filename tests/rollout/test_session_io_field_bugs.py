"""Field bugs of the session, the trajectory files and replay: an env step that raised stopped a file's replay, a text
action that kept its end-of-turn was closed twice, tool results became user messages in SFT rows, a numpy seed made a
trajectory unwritable, a file's out-of-range ids and stray loss mask loaded, and a finished turn that fit the token
limit exactly was clipped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gem_core.errors import MalformedFile
from gem_core.rollout import EpisodeSession
from gem_core.rollout.chat_template import ChatTemplate
from gem_core.rollout.replay import replay_actions, replay_file
from gem_core.rollout.trajectory_io import preference_pairs, read_trajectories, sft_records, write_trajectories


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


async def _episode(tokenizer, env, actions, *, seed=1, **session_kwargs):
    session = EpisodeSession(env, tokenizer, **session_kwargs)
    await session.start(seed=seed)
    for action in actions:
        await session.step(action_text=action)
        if session.done:
            break
    return session.trajectory()


# -- 1. replay of an episode whose env step raised ------------------------------------------------------------------


def test_a_replayed_step_that_raises_is_a_failed_turn_not_an_exception(scripted_env):
    """env.step raising inside replay_actions went straight out of it (the RuntimeError itself): the file's replay
    stopped there (gem replay exited 2) instead of reporting the turn as failed, as TurnChange.error promises."""
    replay = replay_actions(scripted_env(rewards=[0.5, 1.0], fail_on_turn=2), 3, ["a", "b"], [0.5, 0.0], stored_terminated=False)

    assert replay.rewards == [0.5, 0.0] and replay.truncated and not replay.terminated
    assert [(c.turn, c.replayed_reward, c.error) for c in replay.changes] == [(1, 0.0, "RuntimeError: tool crashed")]


async def test_a_file_replay_goes_on_past_an_episode_whose_step_raises(tiny_tokenizer, scripted_env, tmp_path, monkeypatch):
    """A stored episode ended by an env error made replay_file raise the env's RuntimeError: the episodes after it
    were never replayed."""
    from gem_core import placement

    stored = await _episode(tiny_tokenizer, scripted_env(rewards=[0.5, 1.0], fail_on_turn=2), ["a", "b"], env_id="game:GuessTheNumber-v0")
    assert stored.infos[-1]["error"] == "RuntimeError: tool crashed"
    path = tmp_path / "episodes.jsonl"
    write_trajectories(str(path), [stored, stored])
    monkeypatch.setattr(placement, "make_env", lambda env_id, **kwargs: scripted_env(rewards=[0.5, 1.0], fail_on_turn=2))

    count, changes = replay_file(str(path), None)

    assert count == 2
    assert [(c.episode, c.turn, c.error) for c in changes] == [(0, 1, "RuntimeError: tool crashed"), (1, 1, "RuntimeError: tool crashed")]


# -- 2. a text action that already ends its turn ----------------------------------------------------------------------


async def test_a_text_action_that_keeps_its_end_of_turn_is_closed_once(tiny_tokenizer, scripted_env):
    """step(action_text="...<|im_end|>", finish_reason="stop") appended the end-of-turn ids again: two <|im_end|>
    under loss mask 1 in one turn, and the env was handed the raw "<|im_end|>" text."""
    env = scripted_env(rewards=[0.0, 1.0])
    session = EpisodeSession(env, tiny_tokenizer)
    await session.start(seed=0)
    eot = session.chat_template.end_of_turn_ids
    await session.step(action_text="\\boxed{5}<|im_end|>", finish_reason="stop", logprobs=[-0.5] * (len(_encode(tiny_tokenizer, "\\boxed{5}")) + 1))
    traj = session.trajectory()
    start, end = traj.turn_spans[0]

    assert traj.response_ids[start:end] == _encode(tiny_tokenizer, "\\boxed{5}") + eot
    assert traj.response_ids[start:end].count(eot[0]) == 1 and traj.response_ids[end] != eot[0]
    assert env.actions_seen == ["\\boxed{5}"] and traj.actions == ["\\boxed{5}"]


async def test_a_text_action_without_its_end_of_turn_is_still_closed(tiny_tokenizer, scripted_env):
    """The usual text action (the framework dropped the stop string) keeps its sampled end-of-turn id."""
    session = EpisodeSession(scripted_env(rewards=[0.0, 1.0]), tiny_tokenizer)
    await session.start(seed=0)
    await session.step(action_text="\\boxed{5}", finish_reason="stop")
    traj = session.trajectory()
    start, end = traj.turn_spans[0]

    assert traj.response_ids[start:end] == _encode(tiny_tokenizer, "\\boxed{5}") + session.chat_template.end_of_turn_ids


# -- 3. tool results keep their role in SFT rows and preference pairs ---------------------------------------------------


class _ToolEnv:
    """The first answer is a tool result (ToolUse's native calls mark it so), the next ones user turns."""

    def __new__(cls, scripted_env, rewards):
        class ToolEnv(scripted_env):
            def step(self, action):
                observation, reward, terminated, truncated, info = super().step(action)
                if self.turn == 1:
                    info["observation_role"] = "tool"
                return observation, reward, terminated, truncated, info

        return ToolEnv(rewards=rewards)


async def test_sft_rows_keep_the_tool_role_the_session_rendered(tiny_tokenizer, scripted_env):
    """sft_records labelled every observation "user": a tool result the session rendered in the tool role became a
    user message, so the SFT row was another conversation than the one the policy saw."""
    traj = await _episode(tiny_tokenizer, _ToolEnv(scripted_env, [0.0, 1.0]), ["call", "\\boxed{42}"])
    assert "<|im_start|>tool\n" in tiny_tokenizer.decode(traj.response_ids)

    roles = [m["role"] for m in sft_records([traj])[0]["messages"]]

    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_preference_prompts_keep_the_tool_role(tiny_tokenizer, scripted_env):
    """preference_pairs built its prompt's observations as "user" messages too, the tool result included."""
    good = await _episode(tiny_tokenizer, _ToolEnv(scripted_env, [0.0, 1.0]), ["call", "right"], seed=4)
    bad = await _episode(tiny_tokenizer, _ToolEnv(scripted_env, [0.0, 0.0]), ["call", "wrong"], seed=4)

    (pair,) = preference_pairs([good, bad])

    assert [m["role"] for m in pair["prompt"]] == ["user", "assistant", "tool"]


# -- 4. a numpy seed -------------------------------------------------------------------------------------------------------


async def test_a_numpy_seed_is_stored_as_an_int(tiny_tokenizer, scripted_env, tmp_path):
    """start(seed=np.int64(7)) kept the numpy seed in the trajectory, and write_trajectories raised TypeError
    ("Object of type int64 is not JSON serializable")."""
    traj = await _episode(tiny_tokenizer, scripted_env(rewards=[1.0]), ["a"], seed=np.int64(7))

    assert type(traj.seed) is int and traj.seed == 7
    write_trajectories(tmp_path / "t.jsonl", [traj])
    assert read_trajectories(tmp_path / "t.jsonl")[0].seed == 7


# -- 5. a file's token ids and loss mask --------------------------------------------------------------------------------


@pytest.fixture
async def stored_record(tiny_tokenizer, scripted_env, tmp_path):
    traj = await _episode(tiny_tokenizer, scripted_env(rewards=[0.0, 1.0]), ["a", "b"])
    write_trajectories(tmp_path / "t.jsonl", [traj])
    return json.loads((tmp_path / "t.jsonl").read_text())


def _read(record, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return read_trajectories(path)


@pytest.mark.parametrize("field", ["prompt_ids", "response_ids"])
@pytest.mark.parametrize("bad", [-5, 2**70, 2**31])
def test_a_file_s_token_ids_outside_any_vocabulary_are_refused(stored_record, tmp_path, field, bad):
    """Ids like -5 or 2**70 loaded and crashed later in torch.tensor or an embedding lookup, far from the file."""
    stored_record[field] = [bad] + stored_record[field][1:]

    with pytest.raises(MalformedFile, match=f"{field}.*{bad}"):
        _read(stored_record, tmp_path)


def test_a_file_s_loss_mask_must_be_one_exactly_on_the_turn_spans(stored_record, tmp_path):
    """A loss mask of 1 on env tokens loaded: as_sequence() then trained on the env's tokens, as_transitions() on the
    spans only."""
    assert _read(stored_record, tmp_path)  # the record as written loads
    stored_record["loss_mask"] = [1] * len(stored_record["loss_mask"])

    with pytest.raises(MalformedFile, match="loss_mask.*turn_spans"):
        _read(stored_record, tmp_path)


# -- 6. a finished turn that fits the token limit exactly ----------------------------------------------------------------


async def test_a_finished_turn_that_fits_the_limit_exactly_is_not_clipped(tiny_tokenizer, scripted_env):
    """An action ending with its own end-of-turn id and filling the limit exactly was flagged action_clipped: its
    sampled <|im_end|> was cut and re-added as a template token (mask 0, log-prob 0.0)."""
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    action = _encode(tiny_tokenizer, "\\boxed{5}") + ct.end_of_turn_ids
    prompt = await EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, chat_template=ct).start(seed=0)
    session = EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, chat_template=ct, max_total_tokens=len(prompt) + len(action))
    await session.start(seed=0)

    step = await session.step(action, logprobs=[-0.1] * len(action))
    traj = session.trajectory()

    assert "action_clipped" not in step.info
    assert traj.response_ids == action and traj.loss_mask == [1] * len(action) and traj.logprobs == [-0.1] * len(action)


async def test_a_finished_turn_one_token_past_the_limit_is_still_clipped_and_closed(tiny_tokenizer, scripted_env):
    """The exact fit must not let a longer action through: one token over, it is cut and closed by the template."""
    ct = ChatTemplate.for_tokenizer(tiny_tokenizer)
    action = _encode(tiny_tokenizer, "\\boxed{5}") + ct.end_of_turn_ids
    prompt = await EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, chat_template=ct).start(seed=0)
    limit = len(prompt) + len(action) - 1
    session = EpisodeSession(scripted_env(rewards=[1.0]), tiny_tokenizer, chat_template=ct, max_total_tokens=limit)
    await session.start(seed=0)

    step = await session.step(action)
    traj = session.trajectory()

    assert step.info["action_clipped"] is True
    assert len(traj.prompt_ids + traj.response_ids) == limit and traj.loss_mask[-1] == 0
