"""The trajectory loader refuses a JSON null, or a token version out of range, in a record's list fields.

Before: each list field's items were checked with ``next((v for v in value if bad(v)), None)``, which cannot tell
"no bad item" from "the bad item is None". A null in ``token_versions``, ``logprobs``, ``actions``, ``observations``
or ``infos`` loaded silently (``oldest_version`` then raised a raw TypeError); a null in ``response_ids``,
``prompt_ids`` or ``turn_spans`` raised a raw TypeError instead of MalformedFile. A token version of -7 on sampled
tokens loaded too, and the versioned episode then read as unversioned (``oldest_version`` None, staleness 0).
"""

from __future__ import annotations

import json

import pytest

from gem_core.errors import InvalidArgument, MalformedFile
from gem_core.rollout import ChatTemplate, EpisodeSession, TokenTrajectory
from gem_core.rollout.trajectory_io import read_trajectories, trajectory_from_record, trajectory_to_record, write_trajectories


async def versioned_episode(tokenizer, scripted_env) -> TokenTrajectory:
    """A session's episode with versions: a versioned turn, an unversioned one (-1 on its sampled tokens), and a
    cut turn with one version per id (the template's close-turn ids after it are -1)."""
    ct = ChatTemplate.for_tokenizer(tokenizer)
    session = EpisodeSession(scripted_env(rewards=[0.0, 0.0, 1.0]), tokenizer)
    await session.start(seed=1)
    action = list(tokenizer.encode("\\boxed{7}", add_special_tokens=False)) + ct.end_of_turn_ids
    cut = list(tokenizer.encode("\\boxed{8}", add_special_tokens=False))
    await session.step(action, logprobs=[-0.5] * len(action), versions=3)
    await session.step(action)
    await session.step(cut, logprobs=[-0.25] * len(cut), finish_reason="length", versions=list(range(len(cut))))
    return session.trajectory()


def write_record(path, record) -> None:
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")


@pytest.fixture
async def record(tiny_tokenizer, scripted_env):
    trajectory = await versioned_episode(tiny_tokenizer, scripted_env)
    return json.loads(json.dumps(trajectory_to_record(trajectory)))


async def test_a_sessions_versioned_episode_round_trips_through_a_file(tiny_tokenizer, scripted_env, tmp_path):
    """The checks below must keep loading what the session writes: -1 on env and template tokens and on an
    unversioned turn's sampled tokens, a version from 0 on the others."""
    trajectory = await versioned_episode(tiny_tokenizer, scripted_env)
    assert -1 in [v for v, m in zip(trajectory.token_versions, trajectory.loss_mask, strict=True) if m]
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [trajectory])
    (again,) = read_trajectories(path)
    assert again.token_versions == trajectory.token_versions
    assert (again.oldest_version, again.newest_version) == (trajectory.oldest_version, trajectory.newest_version)
    assert again.oldest_version == 0


@pytest.mark.parametrize(
    "name", ["token_versions", "logprobs", "actions", "observations", "infos", "response_ids", "prompt_ids", "turn_spans"]
)
@pytest.mark.parametrize("at", [0, 1])
def test_a_null_item_in_a_list_field_is_refused_naming_field_line_and_index(record, tmp_path, name, at):
    """Before: null in token_versions/logprobs/actions/observations/infos loaded; in response_ids/prompt_ids/
    turn_spans it raised a raw TypeError."""
    record[name][at] = None
    path = tmp_path / "t.jsonl"
    path.write_text("\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(MalformedFile, match=rf"^{path}:2: field '{name}' item {at} is null; expected .* items"):
        read_trajectories(path)


@pytest.mark.parametrize("bad", [-7, -2])
def test_a_negative_version_other_than_minus_one_on_a_sampled_token_is_refused(record, tmp_path, bad):
    """Before: -7 on every sampled token loaded, and the versioned episode read as unversioned (oldest_version None)."""
    at = record["loss_mask"].index(1)
    record["token_versions"][at] = bad
    write_record(tmp_path / "t.jsonl", record)
    with pytest.raises(MalformedFile, match=rf":1: field 'token_versions' item {at} is {bad} on a sampled token; .*-1"):
        read_trajectories(tmp_path / "t.jsonl")


@pytest.mark.parametrize("bad", [0, 5, -2])
def test_a_version_on_an_env_or_template_token_is_refused(record, bad):
    """Before: any int loaded on env tokens, where the session always writes -1."""
    at = record["loss_mask"].index(0)
    record["token_versions"][at] = bad
    with pytest.raises(MalformedFile, match=rf"^field 'token_versions' item {at} is {bad} on an env or template token; .*-1"):
        trajectory_from_record(record)


@pytest.mark.parametrize("bad", [True, 1.5, "3"])
def test_a_version_that_is_not_an_int_is_refused(record, bad):
    record["token_versions"][0] = bad
    with pytest.raises(MalformedFile, match=r"^field 'token_versions' item 0 is a (bool|float|str); expected int items"):
        trajectory_from_record(record)


def trajectory(**overrides):
    fields = dict(
        prompt_ids=[1], response_ids=[5, 6, 7], loss_mask=[1, 0, 1], logprobs=[0.0] * 3, turn_spans=[(0, 1), (2, 3)],
        rewards=[0.5, 1.0], terminated=True, truncated=False,
    )
    return TokenTrajectory(**{**fields, **overrides})


@pytest.mark.parametrize("versions, shown", [([1, None, 2], "None"), ([True, -1, 2], "True"), ([1, -1, 2.0], "2.0")])
def test_token_trajectory_refuses_token_versions_that_are_not_ints(versions, shown):
    """Before: built, then oldest_version raised a raw TypeError (None) or counted True as version 1."""
    at = versions.index(next(v for v in versions if type(v) is not int))
    with pytest.raises(InvalidArgument, match=rf"^token_versions\[{at}\] is {shown}: .*int"):
        trajectory(token_versions=versions)


def test_token_trajectory_refuses_a_version_below_minus_one():
    """Before: -7 built and the episode read as unversioned (oldest_version None)."""
    with pytest.raises(InvalidArgument, match=r"^token_versions\[2\] is -7: .*-1"):
        trajectory(token_versions=[1, -1, -7])


def test_token_trajectory_still_takes_int_versions():
    assert trajectory(token_versions=[4, -1, 2]).oldest_version == 2
    assert trajectory(token_versions=[-1, -1, -1]).oldest_version is None
