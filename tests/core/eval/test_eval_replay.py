"""`gem replay` reads what `gem eval` writes: a run folder, its episodes.jsonl or its report.json is replayed
turn by turn against the current env (it refused eval's episodes.jsonl: "Not a 'gem.trajectory/1' record",
though the README re-judges eval runs with it)."""

from __future__ import annotations

import json
import re

import pytest
from openai_test_server import OpenAITestServer

from changed_graders import OneOffGuessTheNumber
from gem_core import registry
from gem_core.cli import main as gem
from gem_core.eval.cli import main as gem_eval

EASY = "game:GuessTheNumber-v0-easy"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, binary_search):
    """A gem eval run of 8 episodes cut at 2 turns, by a scripted binary-search player behind an OpenAI API."""
    out = tmp_path_factory.mktemp("run")
    with OpenAITestServer(respond=lambda messages: binary_search("\n".join(m["content"] for m in messages))) as server:
        assert gem_eval(["--model", "m", "--base-url", server.base_url, "--env", EASY, "--episodes", "8", "--max-turns", "2",
                         "--no-progress", "--no-plots", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("target", ["", "episodes.jsonl", "report.json"])
def test_gem_replay_of_an_eval_run_replays_every_episode_unchanged(target, run_dir, capsys):
    assert gem(["replay", str(run_dir / target) if target else str(run_dir)]) == 0
    out, err = capsys.readouterr()
    assert "8 episodes replayed, 0 turns changed." in out, out + err
    assert err == ""


def test_gem_replay_of_an_eval_run_lists_the_turns_a_grader_change_moves(run_dir, monkeypatch, capsys):
    """The changed turns are computed here from the transcripts, with the run's two-turn cut."""
    kwargs = registry.spec(EASY).kwargs
    expected = set()
    for line in (run_dir / "episodes.jsonl").read_text().splitlines():
        episode = json.loads(line)
        env = OneOffGuessTheNumber(**kwargs)
        env.reset(seed=episode["seed"])
        for turn, message in enumerate(m for m in episode["transcript"] if m["role"] == "assistant"):
            _, reward, terminated, truncated, _ = env.step(message["content"])
            if reward != episode["rewards"][turn]:
                expected.add((episode["seed"], turn))
            if terminated or truncated:
                break
    assert expected, "the changed grader must change some turns for this test to mean anything"

    monkeypatch.setitem(registry._REGISTRY, EASY, registry.EnvSpec(EASY, OneOffGuessTheNumber, kwargs=dict(kwargs)))
    assert gem(["replay", str(run_dir / "episodes.jsonl")]) == 1  # exit 1: rewards changed
    out = capsys.readouterr().out
    assert f"8 episodes replayed, {len(expected)} turns changed." in out
    listed = {(int(m[0]), int(m[1])) for m in re.findall(r"episode (\d+) turn (\d+): reward", out)}
    assert listed == expected, out  # episode i of the run is seed i (episodes 0-7 are seeds 0-7)



def test_gem_replay_of_an_eval_run_lists_an_end_the_env_no_longer_gives(run_dir, monkeypatch, capsys):
    """An episode the env ended (the number found) that a changed env plays on is a change at its last turn (the
    stored end was not passed on for an eval run: 0 turns changed, exit 0)."""
    from gem_core.envs.game.guess_the_number import GuessTheNumber

    class PlaysOn(GuessTheNumber):
        def step(self, action):
            observation, reward, _, truncated, info = super().step(action)
            return observation, reward, False, truncated, info

    episodes = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    ended = [(e["seed"], len(e["rewards"]) - 1) for e in episodes if e["terminated"]]
    assert ended, "some episode of the run must have found its number for this test to mean anything"
    kwargs = registry.spec(EASY).kwargs
    monkeypatch.setitem(registry._REGISTRY, EASY, registry.EnvSpec(EASY, PlaysOn, kwargs=dict(kwargs)))
    assert gem(["replay", str(run_dir / "episodes.jsonl")]) == 1
    out = capsys.readouterr().out
    listed = {(int(m[0]), int(m[1])) for m in re.findall(r"episode (\d+) turn (\d+): .*the episode no longer ends here", out)}
    assert listed == set(ended), out

def test_a_failed_eval_episode_is_named_and_left_out(run_dir, tmp_path, capsys):
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    broken = json.loads(lines[0]) | {"error": "EndpointError: HTTP 500"}
    path = tmp_path / "episodes.jsonl"
    path.write_text("\n".join([json.dumps(broken), *lines[1:], '{"env_id": "cut sh']) + "\n")
    assert gem(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "7 episodes replayed, 0 turns changed." in out
    assert f"not replayed: {EASY} seed {broken['seed']} sample 0: failed (EndpointError: HTTP 500)" in out
    assert f"not replayed: line {len(lines) + 1}: not an episode record" in out


def test_an_eval_run_folder_without_a_run_is_one_line(tmp_path, capsys):
    assert gem(["replay", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("gem replay: ") and "holds no gem eval run" in line


def test_a_file_of_neither_kind_names_both_kinds_in_one_line(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"prompt": "hello"}\n')
    assert gem(["replay", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Not a 'gem.trajectory/1' record" in line and "gem eval run (its folder, episodes.jsonl or report.json)" in line
