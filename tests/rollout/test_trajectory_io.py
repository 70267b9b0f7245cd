"""Trajectories to and from JSONL, `gem replay` re-scoring, and the SFT / preference exports."""

from __future__ import annotations

import dataclasses
import errno
import json
import re
import subprocess
import sys

import pytest

import gem_core
from changed_graders import OneOffGuessTheNumber
from gem_core.rollout import run_episodes
from gem_core.errors import InvalidArgument, MalformedFile
from gem_core.rollout.trajectory_io import (
    TRAJECTORY_FORMAT,
    decode_env_state,
    preference_pairs,
    read_trajectories,
    sft_records,
    trajectory_from_record,
    trajectory_to_record,
    write_trajectories,
)
from gem_core.testing import ScriptedPolicy

GUESSES = ["\\boxed{10}", "\\boxed{5}", "\\boxed{15}", "\\boxed{3}", "\\boxed{7}"]


@pytest.fixture(scope="module")
def trajectories(tiny_tokenizer):
    import asyncio

    policy = ScriptedPolicy(tiny_tokenizer, GUESSES + ["not a move"])
    return asyncio.run(
        run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, seeds=range(12), record_env_states=True)
    )


def test_the_jsonl_round_trip_is_lossless(tmp_path, trajectories):
    path = tmp_path / "episodes.jsonl"
    assert write_trajectories(path, trajectories) == len(trajectories)
    loaded = read_trajectories(path)
    assert loaded == trajectories  # every field, ids, logprobs, spans (as tuples), infos, metrics
    assert [trajectory_to_record(t) for t in loaded] == [json.loads(line) for line in path.read_text().splitlines()]


def test_the_stored_env_state_of_a_turn_restores_the_env_there(tmp_path, trajectories):
    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, trajectories)
    replayed = 0
    for t in read_trajectories(path):
        assert len(t.env_states) == t.num_turns
        for turn in range(t.num_turns):
            env = gem_core.make(t.env_id)  # a fresh env, never reset: the state alone puts it at this turn
            env.set_state(decode_env_state(t.env_states[turn]))
            observation, reward, terminated, truncated, _ = env.step(t.actions[turn])
            assert reward == t.rewards[turn]
            last = turn == t.num_turns - 1
            assert observation == (t.final_observation if last else t.observations[turn + 1])
            assert (terminated, truncated) == ((t.terminated, t.truncated) if last else (False, False))
            replayed += 1
    assert replayed > len(trajectories)  # multi-turn episodes, not only first turns


def test_a_file_written_before_env_states_existed_reads_with_none(tmp_path, trajectories):
    record = trajectory_to_record(trajectories[0])
    del record["env_states"]
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (loaded,) = read_trajectories(path)
    assert loaded.env_states == [] and loaded.actions == trajectories[0].actions
    assert dataclasses.replace(loaded, env_states=trajectories[0].env_states) == trajectories[0]


def test_without_record_env_states_no_state_is_kept(tiny_tokenizer):
    import asyncio

    policy = ScriptedPolicy(tiny_tokenizer, GUESSES)
    (t,) = asyncio.run(run_episodes("game:GuessTheNumber-v0", policy, tiny_tokenizer, seeds=[0], max_turns=2))
    assert t.env_states == [] and "env_states" in trajectory_to_record(t)


def test_a_record_of_another_format_is_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"format": "something/else"}\n')
    with pytest.raises(ValueError, match="gem.trajectory/1"):
        read_trajectories(path)



def _gem(*args):
    return subprocess.run([sys.executable, "-m", "gem_core.cli", *args], capture_output=True, text=True, timeout=300)


def test_gem_replay_reports_exactly_the_turns_a_grader_change_rescored(tmp_path, trajectories, monkeypatch, capsys):
    from gem_core import registry
    from gem_core.cli import main

    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, trajectories)
    unchanged = _gem("replay", str(path))  # the real command, as a user runs it
    assert unchanged.returncode == 0, unchanged.stderr
    assert f"{len(trajectories)} episodes replayed, 0 turns changed." in unchanged.stdout

    # The same episodes under the lenient grader, computed independently of `gem replay`.
    expected = []
    for episode, trajectory in enumerate(trajectories):
        env = OneOffGuessTheNumber()
        env.reset(seed=trajectory.seed)
        for turn, action in enumerate(trajectory.actions):
            _, reward, terminated, truncated, _ = env.step(action)
            if float(reward) != trajectory.rewards[turn]:
                expected.append(f"episode {episode} turn {turn}: reward {trajectory.rewards[turn]:+g} -> {float(reward):+g}")
            if terminated or truncated:
                break
    assert expected, "the lenient grader must change some turns for this test to mean anything"

    # A grader fix in the registry: the recorded env id now builds the lenient class.
    registry.list_envs()
    monkeypatch.setitem(registry._REGISTRY, "game:GuessTheNumber-v0", registry.EnvSpec("game:GuessTheNumber-v0", OneOffGuessTheNumber))
    assert main(["replay", str(path)]) == 1
    reported = [line for line in capsys.readouterr().out.splitlines() if line.startswith("episode ")]
    assert [line.split(" (")[0] for line in reported] == expected


def test_gem_replay_says_what_is_wrong_with_a_bad_file(tmp_path):
    missing = _gem("replay", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "No such file" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    junk = _gem("replay", str(tmp_path / "junk.jsonl"))
    assert junk.returncode == 2 and "junk.jsonl:1 is not a JSON line" in junk.stderr


def test_sft_rows_are_the_episodes_as_messages(trajectories):
    winners = [t for t in trajectories if t.episode_return >= 1.0]
    rows = sft_records(trajectories, min_return=1.0)
    assert len(rows) == len(winners) > 0
    for row, t in zip(rows, winners):
        roles = [m["role"] for m in row["messages"]]
        assert roles == ["user", "assistant"] * t.num_turns
        assert [m["content"] for m in row["messages"] if m["role"] == "assistant"] == t.actions
        assert row["messages"][0]["content"] == t.observations[0]


def test_preference_pairs_split_same_seed_episodes_at_their_first_different_move(tiny_tokenizer):
    import asyncio

    good = ScriptedPolicy(tiny_tokenizer, ["\\boxed{10}", "\\boxed{5}", "\\boxed{15}"])
    bad = ScriptedPolicy(tiny_tokenizer, ["\\boxed{10}", "nonsense"])
    env = gem_core.make("game:GuessTheNumber-v0")
    seeds = [s for s in range(40) if (env.reset(seed=s), env.target)[1] == 15][:2]
    assert seeds, "need a seed whose number is 15"
    runs = [asyncio.run(run_episodes("game:GuessTheNumber-v0", p, tiny_tokenizer, seeds=seeds, max_turns=3)) for p in (good, bad)]
    pairs = preference_pairs(runs[0] + runs[1])
    assert len(pairs) == len(seeds)
    for pair in pairs:
        assert [m["role"] for m in pair["prompt"]] == ["user", "assistant", "user"]
        assert pair["prompt"][1]["content"] == "\\boxed{10}"
        assert pair["chosen"][0]["content"] == "\\boxed{5}" and pair["rejected"][0]["content"] == "nonsense"


def _guess_runs(tiny_tokenizer, seeds: list[int]) -> tuple[list, list]:
    """Episodes of a winning and a losing script on the same seeds of GuessTheNumber."""
    import asyncio

    good = ScriptedPolicy(tiny_tokenizer, ["\\boxed{10}", "\\boxed{5}", "\\boxed{15}"])
    bad = ScriptedPolicy(tiny_tokenizer, ["\\boxed{10}", "nonsense"])
    return tuple(asyncio.run(run_episodes("game:GuessTheNumber-v0", p, tiny_tokenizer, seeds=seeds, max_turns=3)) for p in (good, bad))


def test_preference_pairs_warns_when_every_seed_has_one_episode(tiny_tokenizer):
    good, bad = _guess_runs(tiny_tokenizer, [0, 1])
    one_each = [good[0], bad[1]]  # different seeds: nothing to compare
    with pytest.warns(UserWarning, match="one episode per \\(env id, seed\\).*several episodes of each seed"):
        assert preference_pairs(one_each) == []


def test_preference_pairs_warns_when_no_episode_has_a_seed(tiny_tokenizer):
    good, bad = _guess_runs(tiny_tokenizer, [0])
    unseeded = [dataclasses.replace(t, seed=None) for t in good + bad]
    with pytest.warns(UserWarning, match="none of the 2 episodes has a seed"):
        assert preference_pairs(unseeded) == []


def test_preference_pairs_warns_when_same_seed_episodes_score_the_same(tiny_tokenizer):
    good, _ = _guess_runs(tiny_tokenizer, [0])
    with pytest.warns(UserWarning, match="every episode of a seed has the same return"):
        assert preference_pairs(good + good) == []


def test_preference_pairs_that_finds_pairs_or_gets_nothing_does_not_warn(tiny_tokenizer, recwarn):
    good, bad = _guess_runs(tiny_tokenizer, [0])
    assert preference_pairs(good + bad) and preference_pairs([]) == []
    assert not [w for w in recwarn if "preference_pairs" in str(w.message)]


def test_recording_env_states_of_an_env_without_get_state_is_refused_up_front(tiny_tokenizer):
    from gem_core.rollout.session import EpisodeSession

    class Stateless:  # e.g. an env behind an HTTP server: its state lives there
        def close(self):
            pass

    with pytest.raises(ValueError, match="record_env_states=True needs an env with get_state"):
        EpisodeSession(Stateless(), tiny_tokenizer, record_env_states=True)


def _then_fail(trajectories, after):
    """The trajectories, then an error after ``after`` of them (a caller's generator that raises, a Ctrl-C)."""
    yield from trajectories[:after]
    raise KeyboardInterrupt


@pytest.mark.parametrize("append", [False, True], ids=["write", "append"])
def test_a_write_that_fails_leaves_the_file_as_it_was(tmp_path, trajectories, append):
    """Written in place, a failed write emptied the file it replaced (its episodes lost) and kept the half it wrote."""
    path = tmp_path / "episodes.jsonl"
    write_trajectories(path, trajectories[:3])
    before = path.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        write_trajectories(path, _then_fail(trajectories, 2), append=append)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["episodes.jsonl"]  # no temporary left beside it
    fresh = tmp_path / "new.jsonl"
    with pytest.raises(KeyboardInterrupt):
        write_trajectories(fresh, _then_fail(trajectories, 2), append=append)
    assert not fresh.exists()


@pytest.mark.parametrize("append", [False, True], ids=["write", "append"])
def test_a_full_disk_leaves_the_file_whole_and_readable(small_disk, trajectories, append):
    """On a full disk an append left a half line at the file's end, and every later read stopped there
    (MalformedFile); an overwrite left the file empty or cut."""
    path = small_disk / "episodes.jsonl"
    write_trajectories(path, trajectories[:2])
    before = path.read_bytes()
    with pytest.raises(OSError) as raised:
        write_trajectories(path, trajectories * 20, append=append)  # far more than the disk's 400 KiB
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == before and read_trajectories(path) == trajectories[:2]
    assert [p.name for p in small_disk.iterdir()] == ["episodes.jsonl"]


def test_a_failed_write_through_a_link_leaves_the_file_it_names_as_it_was(tmp_path, trajectories):
    """A link to the episodes file (kept on a bigger disk) is followed: the write is all or nothing there too, where
    it was written in place through the link, and the link stays."""
    elsewhere = tmp_path / "disk" / "episodes.jsonl"
    elsewhere.parent.mkdir()
    write_trajectories(elsewhere, trajectories[:3])
    before = elsewhere.read_bytes()
    link = tmp_path / "episodes.jsonl"
    link.symlink_to(elsewhere)
    with pytest.raises(KeyboardInterrupt):
        write_trajectories(link, _then_fail(trajectories, 2))
    assert link.is_symlink() and elsewhere.read_bytes() == before
    assert write_trajectories(link, trajectories[:2]) == 2
    assert link.is_symlink() and read_trajectories(elsewhere) == trajectories[:2]


def test_trajectories_written_to_a_device_go_through_it(trajectories):
    assert write_trajectories("/dev/null", trajectories[:2]) == 2


def _record(**fields):
    record = {"format": TRAJECTORY_FORMAT, "env_kwargs": {}, "prompt_ids": [1], "response_ids": [2], "loss_mask": [1], "logprobs": [0.0],
              "turn_spans": [[0, 1]], "rewards": [1.0], "terminated": True, "truncated": False, "env_id": "game:GuessTheNumber-v0",
              "seed": 0, "observations": ["start"], "actions": ["a"]}
    return {**record, **fields}


@pytest.mark.parametrize("fields", [{"actions": ["a", "b", "c"]}, {"observations": ["start", "after a", "after b"]}], ids=["actions", "observations"])
def test_a_record_whose_texts_do_not_match_its_turns_is_refused(tmp_path, fields):
    """Such a file was read, and its SFT and DPO rows paired actions with the wrong observations."""
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(_record(**fields)) + "\n")
    with pytest.raises(InvalidArgument, match="per turn|before each turn"):
        read_trajectories(path)


def test_preference_pairs_skip_episodes_that_keep_no_observation_texts():
    """An agent program's episode keeps its actions but no observations: preference_pairs raised a bare IndexError
    on a group of them."""
    chosen, rejected = (trajectory_from_record(_record(observations=[], actions=[a], rewards=[r])) for a, r in (("a", 1.0), ("b", 0.0)))
    with pytest.warns(UserWarning, match="no pair"):
        assert preference_pairs([chosen, rejected]) == []


@pytest.mark.parametrize(
    "bad",
    [json.dumps(_record(infos=[1])), json.dumps({"format": TRAJECTORY_FORMAT}), json.dumps(_record(seed=0)).replace('"seed": 0', '"seed": ' + "9" * 5000)],
    ids=["field", "missing-fields", "int-past-the-digit-limit"],
)
def test_a_bad_record_is_refused_naming_its_file_and_line(tmp_path, bad):
    """A field of the wrong type said only "field 'infos' holds a int", with no file or line to look at; an int
    literal past Python's 4300-digit limit escaped as a bare ValueError."""
    path = tmp_path / "episodes.jsonl"
    path.write_text("\n".join([json.dumps(_record()), json.dumps(_record()), bad]) + "\n")
    with pytest.raises(MalformedFile, match=re.escape(f"{path}:3")):
        read_trajectories(path)


def test_a_file_with_a_lone_surrogate_writes_back_as_it_was_read(tmp_path):
    """The reader took a JSON-escaped lone surrogate, and writing the trajectory back raised UnicodeEncodeError."""
    source, again = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps(_record(observations=["h\ud800i"], actions=["café"])) + "\n")
    loaded = read_trajectories(source)
    assert write_trajectories(again, loaded) == 1
    assert read_trajectories(again) == loaded
    assert loaded[0].observations == ["h\ud800i"]
    ordinary = tmp_path / "ordinary.jsonl"
    write_trajectories(ordinary, [trajectory_from_record(_record(actions=["café"]))])
    assert "café" in ordinary.read_text(encoding="utf-8")  # text UTF-8 can hold stays readable


@pytest.mark.parametrize(
    ("field", "value"),
    [("loss_mask", [True]), ("loss_mask", [2]), ("rewards", [True]), ("logprobs", [False]), ("turn_spans", [[False, True]]),
     ("rendered_ids", [True])],
)
def test_a_bool_or_a_mask_value_other_than_0_or_1_is_refused(tmp_path, field, value):
    """JSON true read as 1: a file with loss_mask [true] or rewards [true] loaded as if it held numbers, and a mask of 2
    weighted a token twice."""
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(_record(**{field: value})) + "\n")
    with pytest.raises(MalformedFile, match=field):
        read_trajectories(path)
