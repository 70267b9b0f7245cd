"""The episode runner with envs in Ray actors (:mod:`gem_core.vector.ray_env`) on a local three-node
cluster (loopback only, see conftest.py): the same token trajectories as local envs for the same
seeds, steps overlapping across actors, and a node lost mid-step ending only its episodes (issue 18)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import pytest

from gem_core.env import Env
from gem_core.rollout import SamplingParams, run_episodes
from gem_core.testing import ScriptedPolicy, make_tokenizer
from gem_core.vector.ray_env import RayEnv, RayEnvPool

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

ENV_RESOURCE = "gem_env_test"  # the worker nodes' resource (conftest.py)
POOL_OPTIONS = {"num_cpus": 0, "resources": {ENV_RESOURCE: 1}}
TURNS = 2


class SlowGuess(Env):
    """A two-turn guessing env whose steps take ``delay`` seconds (a tool call or a grader); the secret
    comes from the seeded RNG and the feedback quotes the action, so episodes differ by seed and policy."""

    def __init__(self, delay: float = 0.0):
        self.delay, self.secret, self.turn = delay, 0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.secret, self.turn = int(self.np_random.integers(10)), 0
        return f"Guess a digit; hint: it is {'even' if self.secret % 2 == 0 else 'odd'}.", {"secret": self.secret}

    def step(self, action: str):
        if action == "raise":
            raise ValueError("a broken env")
        time.sleep(self.delay)
        self.turn += 1
        right = action.strip() == str(self.secret)
        obs = f"{action!r} is {'right' if right else 'wrong'}; {self.secret * (self.turn + 1)} to go."
        return obs, float(right) - 0.1 * self.turn, right or self.turn >= TURNS, False, {"turn": self.turn}

    def sample_random_action(self) -> str:
        return str(int(self.np_random.integers(10)))


def policy_for(tokenizer) -> ScriptedPolicy:
    return ScriptedPolicy(tokenizer, ["3", "8"])


def comparable(trajectory) -> dict[str, Any]:
    return dataclasses.asdict(trajectory)


async def test_runner_on_ray_actors_matches_local_envs_and_overlaps_the_steps(ray_cluster):
    tokenizer = make_tokenizer()
    seeds = list(range(64))
    kwargs = {"sampling": SamplingParams(max_new_tokens=8), "max_turns": TURNS}
    local = await run_episodes(lambda: SlowGuess(delay=0.0), policy_for(tokenizer), tokenizer, seeds, **kwargs)

    with RayEnvPool(num_actors=2, max_envs_per_actor=64, **POOL_OPTIONS) as pool:
        assert set(pool.actor_node_ids()) == {ray_cluster.env_node.node_id, ray_cluster.sandbox_node.node_id}
        await run_episodes(pool.factory(SlowGuess), policy_for(tokenizer), tokenizer, seeds[:2], **kwargs)  # warm the actors
        started = time.perf_counter()
        remote = await run_episodes(pool.factory(SlowGuess, delay=1.0), policy_for(tokenizer), tokenizer, seeds, **kwargs)
        elapsed = time.perf_counter() - started

    assert [comparable(t) for t in remote] == [comparable(t) for t in local]
    turns = max(t.num_turns for t in remote)
    serial = sum(t.num_turns for t in remote) * 1.0
    print(f"\n64 episodes, {turns} turns of a 1 s step on 2 Ray actors: {elapsed:.2f} s = {elapsed / turns:.2f}x one step "
          f"per turn (serial: {serial:.0f} s)")
    assert elapsed < serial / 8  # steps overlapped; a serial run would take `serial` seconds


async def test_the_event_loop_keeps_running_while_an_actor_steps(ray_cluster):
    with RayEnvPool(**POOL_OPTIONS) as pool:
        env = pool.make(SlowGuess, delay=1.0)
        await env.areset(seed=1)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        ticker = asyncio.create_task(tick())
        await env.astep("3")
        ticker.cancel()
        assert ticks >= 10  # ~20 in one second: nothing blocked the loop
        env.close()


def test_ray_env_forwards_reset_step_and_state(ray_cluster):
    env = RayEnv(SlowGuess, pool_options=POOL_OPTIONS)
    local = SlowGuess()
    assert env.reset(seed=5) == local.reset(seed=5)
    state = env.get_state()
    assert env.step("1") == local.step("1")
    env.set_state(state)  # back to before the first step
    local.reset(seed=5)
    assert env.step("7") == local.step("7")
    assert env.node_id() in {ray_cluster.env_node.node_id, ray_cluster.sandbox_node.node_id}
    env.close()
    assert env.pool.closed  # it owned its pool


def test_an_env_that_raises_raises_as_a_local_env_does(ray_cluster):
    with RayEnvPool(**POOL_OPTIONS) as pool:
        env = pool.make(SlowGuess)
        with pytest.raises(RuntimeError, match="reset"):
            env.step("1")  # a step before reset: the actor has no env under this key yet
        env.reset(seed=0)
        with pytest.raises(ValueError, match="a broken env"):
            env.step("raise")


def test_a_node_lost_mid_step_truncates_only_its_episodes(ray_cluster):
    tokenizer = make_tokenizer()
    pool = RayEnvPool(num_actors=2, **POOL_OPTIONS)
    nodes = pool.actor_node_ids()
    victim = ray_cluster.env_node
    assert victim.node_id in nodes and len(set(nodes)) == 2
    envs: list[RayEnv] = []

    def factory() -> RayEnv:
        envs.append(pool.make(SlowGuess, delay=4.0))
        return envs[-1]

    result: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: result.setdefault(
            "trajectories",
            asyncio.run(run_episodes(factory, policy_for(tokenizer), tokenizer, list(range(4)), max_turns=TURNS)),
        )
    )
    runner.start()
    time.sleep(2.5)  # every episode is inside its first 4 s step
    on_victim = [pool.actor_node_ids()[env._slot] == victim.node_id for env in envs]
    ray_cluster.cluster.remove_node(victim)
    runner.join(120)
    assert not runner.is_alive()
    trajectories = result["trajectories"]
    assert any(on_victim) and not all(on_victim)
    for lost, trajectory in zip(on_victim, trajectories):
        if lost:
            assert trajectory.truncated and trajectory.num_turns == 1
            assert trajectory.infos[-1]["error"].startswith("ActorDied")
        else:
            assert "error" not in trajectory.infos[-1] and trajectory.num_turns >= 1
    # The pool replaced the lost actor: a new episode runs on the surviving node.
    env = pool.make(SlowGuess)
    assert env.reset(seed=3) == SlowGuess().reset(seed=3)
    assert set(pool.actor_node_ids()) == {ray_cluster.sandbox_node.node_id}
    pool.close()


def test_make_env_switches_a_registered_env_onto_the_default_pool(ray_cluster, monkeypatch):
    from gem_core import make, placement
    from gem_core.vector import ray_env

    monkeypatch.setenv("GEM_RAY_ENV_ACTORS", "1")
    monkeypatch.setenv("GEM_RAY_ENV_CPUS", "0")
    monkeypatch.setenv("GEM_RAY_ENV_RESOURCES", '{"%s": 1}' % ENV_RESOURCE)
    env = placement.make_env("game:GuessTheNumber-v0", "ray")
    try:
        assert isinstance(env, RayEnv)
        local = make("game:GuessTheNumber-v0")
        assert env.reset(seed=4) == local.reset(seed=4)
        assert env.step("\\boxed{5}") == local.step("\\boxed{5}")
        assert env.node_id() != ray.get_runtime_context().get_node_id()  # not the driver's (head) node
    finally:
        env.close()
        ray_env.default_env_pool().close()
    assert not isinstance(placement.make_env("game:GuessTheNumber-v0"), RayEnv)
    with pytest.raises(ValueError, match="env_backend='slurm'"):
        placement.make_env("game:GuessTheNumber-v0", "slurm")
    monkeypatch.setenv("GEM_RAY_ENV_RESOURCES", "gem_env")
    with pytest.raises(ValueError, match="GEM_RAY_ENV_RESOURCES"):
        ray_env.pool_options_from_environment()


async def test_forked_sessions_branch_the_remote_env_like_a_local_one(ray_cluster):
    from gem_core.rollout import run_branched_episode

    tokenizer = make_tokenizer()
    with RayEnvPool(**POOL_OPTIONS) as pool:
        runs = []
        for env in (SlowGuess(), pool.make(SlowGuess)):
            branches = await run_branched_episode(
                env, policy_for(tokenizer), tokenizer, branch_turn=1, num_branches=3, seed=7, max_turns=TURNS
            )
            runs.append([comparable(t) for t in branches])
        assert len(runs[1]) == 3 and runs[0] == runs[1]


async def test_gem_env_backend_moves_the_envs_of_dataset_rows_to_ray(ray_cluster, monkeypatch):
    """What the verl, OpenRLHF and RL2 adapters call (EpisodeSession.from_label): one variable switches."""
    from gem_core.rollout import EpisodeSession
    from gem_core.rollout.runner import run_session
    from gem_core.vector import ray_env

    tokenizer = make_tokenizer()
    label = {"env_id": "game:GuessTheNumber-v0", "seed": 9, "env_kwargs": {}}
    policy = ScriptedPolicy(tokenizer, ["\\boxed{5}", "\\boxed{7}", "\\boxed{3}"])
    trajectories = []
    for backend in ("local", "ray"):
        monkeypatch.setenv("GEM_ENV_BACKEND", backend)
        monkeypatch.setenv("GEM_RAY_ENV_RESOURCES", '{"%s": 1}' % ENV_RESOURCE)
        monkeypatch.setenv("GEM_RAY_ENV_CPUS", "0")
        session = EpisodeSession.from_label(label, tokenizer, max_turns=3)
        assert isinstance(session.env, RayEnv) == (backend == "ray")
        trajectories.append(comparable(await run_session(session, policy)))
        await session.aclose()
    ray_env.default_env_pool().close()
    assert trajectories[0] == trajectories[1]
    monkeypatch.setenv("GEM_ENV_BACKEND", "slurm")
    with pytest.raises(ValueError, match="GEM_ENV_BACKEND='slurm'"):
        EpisodeSession.from_label(label, tokenizer)
