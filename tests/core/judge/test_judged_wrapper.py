"""Judged envs: the wrapper over any env, the judge:Sample family, the export and the replay of verdicts."""

from __future__ import annotations

import asyncio
import json

import pytest

import gem_core
from gem_core.env import Env
from gem_core.judge import Criterion, Judge, Rubric
from gem_core.rollout.replay import replay_actions
from gem_core.wrappers.judged import Judged

RUBRIC = Rubric((Criterion("correctness", "Agrees with the reference."),))


class ThreeTurns(Env):
    """Asks for three answers; a reply of '?' is malformed; pays 0.5 per turn itself."""

    max_step_seconds = 1.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return "Name a colour of the rainbow.", {}

    def step(self, action):
        if action == "?":
            return self.invalid_action("Say something.")
        self.turn += 1
        return f"Turn {self.turn} done; another colour?", 0.5, self.turn >= 3, False, {}

    def sample_random_action(self):
        return "red"


def judge_for(server, **kwargs) -> Judge:
    return Judge(server.url, "scripted-judge", timeout=5.0, max_retries=0, **kwargs)


def test_the_final_answer_of_judge_sample_is_judged_against_its_reference(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = judge_for(server)
    env = gem_core.make("judge:Sample", judge=judge)
    try:
        env.reset(seed=0)
        reference = env.unwrapped.judge_reference
        _, right, terminated, truncated, info = env.step(f"Here it is: {reference}")
        env.reset(seed=0)
        _, wrong, *_ = env.step("I do not know.")
    finally:
        judge.close()
    assert terminated and not truncated
    assert right == pytest.approx(0.8) and wrong == pytest.approx(0.2)
    assert info["env_reward"] == 0.0 and info["judge"]["error"] is None
    assert json.loads(info["judge"]["raw"])["scores"] == info["judge"]["scores"]
    assert reference not in env.reset(seed=0)[0]  # the policy never sees the reference


def test_judge_url_and_model_build_the_judge(judge_server, tmp_path):
    server = judge_server([{"kind": "rule"}])
    env = gem_core.make("judge:Sample", judge_url=server.url, judge_model="scripted-judge", judge_cache=str(tmp_path / "c.sqlite"))
    try:
        env.reset(seed=1)
        _, reward, *_ , info = env.step("no idea")
    finally:
        thread = env.judge._loop_thread.thread
        env.close()  # the env built this judge, so it closes it
    assert reward == pytest.approx(0.2) and info["judge"]["model"] == "scripted-judge"
    assert env.judge._loop_thread is None and not thread.is_alive()
    with pytest.raises(ValueError, match="both judge_url= and judge_model="):
        gem_core.make("judge:Sample", judge_url=server.url)


def test_without_a_judge_answers_pay_zero_with_an_error_naming_the_fix():
    env = gem_core.make("judge:Sample")
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("An answer.")
    assert reward == 0.0 and terminated and not truncated and "--judge-url" in info["error"]


def test_on_turn_judges_every_answer_but_not_malformed_ones(judge_server):
    from gem_core.judge import build_messages

    server = judge_server([{"kind": "rule"}])
    tasks = []

    def recording(rubric, task, answer, reference, nonce):
        tasks.append(task)
        return build_messages(rubric, task, answer, reference, nonce)

    judge = judge_for(server, prompt=recording)
    env = Judged(ThreeTurns(), judge, RUBRIC, on="turn", reference="indigo")
    try:
        env.reset(seed=0)
        steps = [env.step(a) for a in ("indigo", "?", "red", "indigo")]
    finally:
        judge.close()
    assert [s[1] for s in steps] == [pytest.approx(0.8), -0.1, pytest.approx(0.2), pytest.approx(0.8)]
    assert "judge" not in steps[1][4] and steps[1][4]["format_error"]
    assert steps[-1][2] and server.stats()["requests"] == 3  # the malformed answer is not sent
    assert tasks[0] == "Name a colour of the rainbow." and "Turn 2 done" in tasks[-1]  # each turn judged in its context


def test_on_final_judges_only_the_last_answer_and_add_keeps_the_env_reward(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = judge_for(server)
    env = Judged(ThreeTurns(), judge, RUBRIC, on="final", reward="add", reference="indigo")
    try:
        env.reset(seed=0)
        rewards = [env.step(a)[1] for a in ("red", "blue", "indigo")]
    finally:
        judge.close()
    assert rewards == [0.5, 0.5, pytest.approx(0.5 + 0.8)] and server.stats()["requests"] == 1


def test_astep_judges_without_blocking_the_callers_loop(judge_server):
    server = judge_server([{"kind": "delay", "seconds": 0.2, "then": {"kind": "rule"}}])
    judge = judge_for(server)
    envs = [Judged(ThreeTurns(), judge, RUBRIC, on="turn", reference="indigo") for _ in range(4)]

    async def play():
        for env in envs:
            await env.areset(seed=0)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        results = await asyncio.gather(*(env.astep(c) for env, c in zip(envs, ("indigo", "red", "teal", "gold"))))
        tick.cancel()
        return results, ticks

    try:
        results, ticks = asyncio.run(play())
    finally:
        judge.close()
    assert [r[1] for r in results] == [pytest.approx(0.8)] + [pytest.approx(0.2)] * 3
    assert ticks > 1  # the loop kept running while the judge worked


@pytest.mark.parametrize("script", [[{"kind": "status", "code": 429, "retry_after": "0"}], [{"kind": "reply", "content": "10/10"}]])
def test_a_failing_judge_pays_zero_and_truncates_only_when_asked(judge_server, script):
    server = judge_server(script)
    judge = judge_for(server)
    try:
        going_on = Judged(ThreeTurns(), judge, RUBRIC, on="turn", reference="indigo")
        going_on.reset(seed=0)
        _, reward, terminated, truncated, info = going_on.step("indigo")
        assert (reward, terminated, truncated) == (0.0, False, False) and info["error"].startswith("judge:")
        cut = Judged(ThreeTurns(), judge, RUBRIC, on="turn", reference="indigo", truncate_on_error=True)
        cut.reset(seed=0)
        _, reward, terminated, truncated, info = cut.step("indigo")
        assert (reward, terminated, truncated) == (0.0, False, True) and info["judge"]["error"] == info["error"]
    finally:
        judge.close()


def test_judged_env_state_round_trips_and_spawns_share_the_judge(judge_server):
    server = judge_server([{"kind": "rule"}])
    judge = judge_for(server)
    env = Judged(ThreeTurns(), judge, RUBRIC, on="turn", reference="indigo")
    try:
        env.reset(seed=0)
        env.step("red")
        clone = env.spawn()
        assert clone.judge is judge and clone.env.unwrapped.turn == 1
        assert clone.step("indigo")[1] == pytest.approx(0.8)
    finally:
        judge.close()


def test_verdicts_are_in_the_exported_trajectory_and_a_replay_costs_no_call(judge_server, tmp_path, tiny_tokenizer, record_judged_episodes):
    from gem_core.rollout.trajectory_io import read_trajectories

    server = judge_server([{"kind": "rule"}])
    cache = str(tmp_path / "verdicts.sqlite")
    judge = judge_for(server, cache=cache)
    try:
        path = record_judged_episodes(judge, tiny_tokenizer, "Light scatters; blue wavelengths scatter most.", tmp_path / "episodes.jsonl")
    finally:
        judge.close()
    stored = read_trajectories(path)
    for trajectory in stored:
        verdict = trajectory.infos[-1]["judge"]
        assert verdict["raw"] and verdict["model"] == "scripted-judge" and verdict["rubric_digest"]
        assert trajectory.rewards[-1] == pytest.approx(verdict["reward"])
    calls = server.stats()["requests"]
    distinct = len({t.infos[-1]["judge"]["key"] for t in stored})  # two seeds may draw the same task
    assert distinct <= calls <= 3

    replay_judge = judge_for(server, cache=cache)  # the same judge and cache: replays are free
    try:
        env = gem_core.make("judge:Sample", judge=replay_judge)
        for trajectory in stored:
            replay = replay_actions(env, trajectory.seed, trajectory.actions, trajectory.rewards)
            assert replay.changes == [] and replay.infos[-1]["judge"]["cached"]
    finally:
        replay_judge.close()
    assert server.stats()["requests"] == calls

    other = judge_server([{"kind": "reply", "content": '{"scores": {"correctness": 10, "completeness": 10, "clarity": 10}}'}])
    rejudge = Judge(other.url, "another-judge", timeout=5.0, max_retries=0, cache=cache)  # a different judge re-judges
    try:
        env = gem_core.make("judge:Sample", judge=rejudge)
        changes = [c for t in stored for c in replay_actions(env, t.seed, t.actions, t.rewards).changes]
    finally:
        rejudge.close()
    assert len(changes) == 3 and all(c.replayed_reward == 1.0 for c in changes) and other.stats()["requests"] == distinct
