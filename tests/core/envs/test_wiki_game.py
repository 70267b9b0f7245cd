"""WikiGame on the shipped link graph: solvable, offline, and strict about which clicks are links.

The contract tests (gymnasium checker, determinism, hostile actions, state) cover it through
``list_envs()``; these check the game itself.
"""

from __future__ import annotations

import re

import pytest

import gem_core
from gem_core.envs.game.wiki_game import WikiGame, load_link_graph

IDS = ["game:WikiGame-v0-easy", "game:WikiGame-v0", "game:WikiGame-v0-hard"]


def solve(env, observation):
    """A solver that reads only the observations, with the shipped graph as its map."""
    graph = load_link_graph()
    target = re.search(r"to '([^']+)'", observation).group(1)
    total, turns = 0.0, 0
    while True:
        page = re.search(r"You are on '([^']+)'", observation).group(1)
        path = graph.shortest_path(page, target)
        observation, reward, terminated, truncated, info = env.step(f"I will click \\boxed{{{path[1]}}}")
        total, turns = total + float(reward), turns + 1
        if terminated or truncated:
            return total, turns, info


@pytest.mark.parametrize("env_id", IDS)
def test_the_solver_wins_seeds_0_to_19_in_the_shortest_number_of_clicks(env_id):
    env = gem_core.make(env_id)
    graph = load_link_graph()
    for seed in range(20):
        observation, info = env.reset(seed=seed)
        distance = graph.distances_from(info["start"])[info["target"]]
        assert env.unwrapped.min_distance <= distance <= env.unwrapped.max_distance
        total, turns, last = solve(env, observation)
        assert (total, turns, last["success"]) == (1.0, distance, True)
        assert last["path"][0] == info["start"] and last["path"][-1] == info["target"]


def test_random_clicks_win_far_less_often_than_the_solver():
    env = gem_core.make("game:WikiGame-v0")
    wins = 0
    for seed in range(200):
        env.reset(seed=seed)
        while True:
            _, reward, terminated, truncated, _ = env.step(env.sample_random_action())
            if terminated or truncated:
                wins += reward == 1.0
                break
    assert wins < 100  # the solver wins all 200


def test_a_click_that_is_not_a_link_costs_the_penalty_and_shows_the_links_again():
    env = WikiGame()
    env.reset(seed=0)
    page = env.page
    observation, reward, terminated, truncated, info = env.step("\\boxed{Not A Page}")
    assert reward == env.format_penalty and info["format_error"] and not (terminated or truncated)
    assert f"one link of '{page}'" in observation and "Links: " in observation
    assert env.page == page and env.turn == 1


def test_titles_match_without_regard_to_case():
    env = WikiGame()
    env.reset(seed=3)
    link = env.graph.links[env.page][0]
    _, reward, _, _, info = env.step(f"\\boxed{{{link.upper()}}}")
    assert "format_error" not in info and env.page == link


def test_running_out_of_clicks_truncates():
    env = WikiGame(min_distance=3, max_distance=3, max_turns=3)
    env.reset(seed=1)
    for turn in range(3):
        _, _, terminated, truncated, _ = env.step("\\boxed{nowhere}")
    assert truncated and not terminated


def test_a_malformed_graph_file_names_the_line(tmp_path):
    bad = tmp_path / "graph.tsv"
    bad.write_text("A\tonly two fields\n")
    with pytest.raises(ValueError, match="graph.tsv:1"):
        WikiGame(graph_file=str(bad))


def test_impossible_settings_say_what_to_change():
    with pytest.raises(ValueError, match="max_turns"):
        WikiGame(min_distance=2, max_distance=5, max_turns=3)
    with pytest.raises(ValueError, match="widen the range"):
        WikiGame(min_distance=40, max_distance=50, max_turns=60)


async def test_one_episode_through_the_token_runner(tiny_tokenizer):
    from gem_core.rollout import run_episode
    from gem_core.testing import ScriptedPolicy

    env = gem_core.make("game:WikiGame-v0-easy")
    observation, info = env.reset(seed=4)
    path = load_link_graph().shortest_path(info["start"], info["target"])
    policy = ScriptedPolicy(tiny_tokenizer, [f"\\boxed{{{page}}}" for page in path[1:]])
    trajectory = await run_episode(gem_core.make("game:WikiGame-v0-easy"), policy, tiny_tokenizer, seed=4)
    assert trajectory.rewards[-1] == 1.0 and trajectory.terminated and trajectory.num_turns == len(path) - 1
