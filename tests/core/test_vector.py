"""Tests for gem_core.vector: autoreset semantics, seeding, errors, subsets, backends."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import signal
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gem_core.env import Env
from gem_core.registry import UnknownEnvError
from gem_core.vector import VectorEnv, make_vec

BACKENDS = ["sync", "thread", "process", "async"]


class CounterEnv(Env):
    """Ends (terminated) after ``length`` steps. Each episode draws a tag from the env's RNG, so
    seeding is visible in the observations. The action ``"raise"`` makes step raise."""

    def __init__(self, length: int = 2):
        self.length = length
        self.episode = 0
        self.count = 0
        self.tag = -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.episode += 1
        self.count = 0
        self.tag = int(self.np_random.integers(1000))
        return f"start {self.tag}", {"episode": self.episode}

    def step(self, action: str):
        if action == "raise":
            raise ValueError("boom from CounterEnv")
        self.count += 1
        return f"{self.tag}:{self.count}:{action}", float(self.count), self.count >= self.length, False, {"count": self.count}

    def sample_random_action(self) -> str:
        return "a"


def episode_tags(seed: int, episodes: int) -> list[int]:
    """The tags a standalone CounterEnv draws: first reset with ``seed``, then RNG continuation."""
    env = CounterEnv()
    tags = [int(env.reset(seed=seed)[0].split()[1])]
    for _ in range(episodes - 1):
        tags.append(int(env.reset()[0].split()[1]))
    return tags


def counters(*lengths: int, **kwargs: Any) -> VectorEnv:
    return make_vec([functools.partial(CounterEnv, length=n) for n in lengths], **kwargs)


def plain(infos: dict[str, Any]) -> dict[str, Any]:
    """Infos with arrays as lists, so two runs can be compared with ==."""
    return {k: plain(v) if isinstance(v, dict) else np.asarray(v).tolist() for k, v in infos.items()}


# --------------------------------------------------------------------------------------------------
# autoreset modes (exact sequences around an episode end)


def test_next_step_autoreset_returns_last_obs_then_resets_on_the_following_step():
    t0, t0_next = episode_tags(seed=7, episodes=2)
    t1 = episode_tags(seed=8, episodes=1)[0]
    vec = counters(2, 5, autoreset_mode=AutoresetMode.NEXT_STEP, seed=7)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP

    obs, infos = vec.reset()
    assert obs == (f"start {t0}", f"start {t1}")
    assert infos["episode"].tolist() == [1, 1]

    vec.step(["a", "a"])
    obs, rew, term, trunc, infos = vec.step(["b", "b"])
    assert obs == (f"{t0}:2:b", f"{t1}:2:b")  # the ended episode's last obs is the step's obs
    assert rew.tolist() == [2.0, 2.0] and term.tolist() == [True, False] and trunc.tolist() == [False, False]
    assert infos["count"].tolist() == [2, 2] and "final_obs" not in infos

    obs, rew, term, trunc, infos = vec.step(["c", "c"])  # env 0's action is ignored: it resets
    assert obs == (f"start {t0_next}", f"{t1}:3:c")
    assert rew.tolist() == [0.0, 3.0] and term.tolist() == [False, False] and trunc.tolist() == [False, False]
    assert infos["episode"].tolist()[0] == 2 and infos["_episode"].tolist() == [True, False]
    assert infos["_count"].tolist() == [False, True]

    obs, *_ = vec.step(["d", "d"])
    assert obs[0] == f"{t0_next}:1:d"
    vec.close()


def test_same_step_autoreset_returns_new_obs_and_puts_final_obs_in_infos():
    t0, t0_next = episode_tags(seed=7, episodes=2)
    vec = counters(2, 5, autoreset_mode="SameStep", seed=7)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    vec.reset()
    vec.step(["a", "a"])

    obs, rew, term, trunc, infos = vec.step(["b", "b"])
    assert obs[0] == f"start {t0_next}"
    assert rew.tolist() == [2.0, 2.0] and term.tolist() == [True, False] and trunc.tolist() == [False, False]
    assert infos["_final_obs"].tolist() == [True, False] and infos["final_obs"][0] == f"{t0}:2:b"
    assert infos["final_info"]["count"][0] == 2 and infos["_final_info"].tolist() == [True, False]
    assert infos["episode"][0] == 2 and infos["_episode"].tolist() == [True, False]  # the reset info
    assert infos["count"][1] == 2 and infos["_count"].tolist() == [False, True]

    obs, rew, term, _, _ = vec.step(["c", "c"])  # env 0 steps right away in its new episode
    assert obs[0] == f"{t0_next}:1:c" and rew[0] == 1.0 and not term[0]
    vec.close()


def test_disabled_autoreset_never_resets_and_refuses_to_step_an_ended_env():
    t0, t0_next = episode_tags(seed=7, episodes=2)
    vec = counters(2, 5, autoreset_mode=AutoresetMode.DISABLED, seed=7)
    vec.reset()
    vec.step(["a", "a"])
    obs, _, term, _, infos = vec.step(["b", "b"])
    assert obs[0] == f"{t0}:2:b" and term.tolist() == [True, False] and "final_obs" not in infos

    with pytest.raises(ValueError, match="reset_mask"):
        vec.step(["c", "c"])
    obs, *_ = vec.step({1: "c"})  # the other env still steps
    assert obs == (f"{t0}:2:b", obs[1]) and obs[1].endswith(":3:c")

    obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
    assert obs[0] == f"start {t0_next}" and obs[1].endswith(":3:c")
    assert infos["_episode"].tolist() == [True, False]
    obs, *_ = vec.step(["d", "d"])
    assert obs[0] == f"{t0_next}:1:d" and obs[1].endswith(":4:d")
    vec.close()


# --------------------------------------------------------------------------------------------------
# seeding and backends


def run_fixed_policy(backend: str, mode: AutoresetMode, steps: int = 14) -> list[Any]:
    vec = make_vec(
        ["game:Wordle-v0", "game:GuessTheNumber-v0", "game:Wordle-v0-hard", "game:GuessTheNumber-v0-easy"],
        backend=backend,
        autoreset_mode=mode,
        seed=123,
    )
    rng = np.random.default_rng(0)  # the policy's randomness, the same for every backend
    words = ["crane", "slate", "pious", "xx", "audio"]
    obs, infos = vec.reset()
    record: list[Any] = [(obs, plain(infos))]
    for _ in range(steps):
        actions = [f"\\boxed{{{words[rng.integers(len(words))]}}}" if i % 2 == 0 else f"\\boxed{{{rng.integers(1, 21)}}}" for i in range(4)]
        obs, rew, term, trunc, infos = vec.step(actions)
        record.append((obs, rew.tolist(), term.tolist(), trunc.tolist(), plain(infos)))
    vec.close()
    return record


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_same_seed_gives_identical_episodes_on_every_backend(mode):
    reference = run_fixed_policy("sync", mode)
    assert any(any(step[2]) or any(step[3]) for step in reference[1:]), "the run should cross an episode end"
    for backend in BACKENDS[1:]:
        assert run_fixed_policy(backend, mode) == reference, backend


def test_different_seeds_give_different_episodes_and_autoresets_continue_each_envs_rng():
    a = make_vec("game:Wordle-v0", num_envs=3, seed=1)
    b = make_vec("game:Wordle-v0", num_envs=3, seed=2)
    a.reset()
    b.reset()
    assert a.get_attr("target") != b.get_attr("target")
    first = a.get_attr("target")
    a.reset()  # no seed: each env continues its RNG, so new words rather than a replay
    assert a.get_attr("target") != first
    a.reset(seed=1)
    assert a.get_attr("target") == first
    a.close()
    b.close()


# --------------------------------------------------------------------------------------------------
# errors, dead workers, subsets


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_env_that_raises_is_truncated_with_the_error_and_the_others_go_on(backend):
    vec = counters(3, 3, 3, backend=backend, seed=0)
    ref = counters(3, 3, 3, seed=0)
    vec.reset()
    ref.reset()
    before = vec.step(["a", "a", "a"])[0]
    ref.step(["a", "a", "a"])

    obs, rew, term, trunc, infos = vec.step(["b", "raise", "b"])
    ref_obs, ref_rew, *_ = ref.step(["b", "b", "b"])
    assert trunc.tolist() == [False, True, False] and term.tolist() == [False, False, False]
    assert "boom from CounterEnv" in infos["error"][1] and infos["_error"].tolist() == [False, True, False]
    assert obs[1] == before[1] and rew[1] == 0.0  # the previous obs, no reward
    assert (obs[0], obs[2]) == (ref_obs[0], ref_obs[2]) and rew[[0, 2]].tolist() == ref_rew[[0, 2]].tolist()

    obs, *_ = vec.step(["c", "c", "c"])  # next step: env 1 autoresets, the others finish their episode
    assert obs[1].startswith("start ") and obs[0].endswith(":3:c")
    vec.close()
    ref.close()


def test_same_step_reports_a_step_error_in_final_info():
    vec = counters(3, 3, autoreset_mode=AutoresetMode.SAME_STEP)
    vec.reset()
    obs, _, _, trunc, infos = vec.step(["raise", "a"])
    assert trunc.tolist() == [True, False]
    assert "boom" in infos["final_info"]["error"][0] and infos["final_obs"][0].startswith("start ")
    assert obs[0].startswith("start ") and infos["_episode"].tolist() == [True, False]
    vec.close()


def test_a_killed_process_worker_is_replaced_and_only_its_episode_is_truncated():
    # One worker per env (the default groups envs over one worker per CPU): the kill touches env 1 only.
    vec = counters(4, 4, 4, backend="process", seed=0, backend_kwargs={"num_workers": 3})
    ref = counters(4, 4, 4, seed=0)
    vec.reset()
    ref.reset()
    before = vec.step(["a", "a", "a"])[0]
    ref.step(["a", "a", "a"])
    old_pid = vec.backend.worker_pids()[1]
    victim = vec.backend.workers[1].process
    os.kill(old_pid, signal.SIGKILL)
    victim.join(timeout=10)  # make sure it is dead before stepping (and reap it)

    obs, rew, term, trunc, infos = vec.step(["b", "b", "b"])
    ref_obs, ref_rew, ref_term, ref_trunc, ref_infos = ref.step(["b", "b", "b"])
    assert trunc.tolist() == [False, True, False] and term.tolist() == ref_term.tolist()
    assert infos["error"][1].startswith("WorkerDied") and infos["_error"].tolist() == [False, True, False]
    assert obs[1] == before[1]
    assert (obs[0], obs[2]) == (ref_obs[0], ref_obs[2]) and rew[[0, 2]].tolist() == ref_rew[[0, 2]].tolist()
    assert infos["count"][[0, 2]].tolist() == [2, 2] and infos["_count"].tolist() == [True, False, True]

    new_pid = vec.backend.worker_pids()[1]
    assert new_pid != old_pid and vec.backend.workers[1].process.is_alive()
    obs, *_ = vec.step(["c", "c", "c"])  # the replacement starts a new episode; the others go on
    assert obs[1].startswith("start ") and obs[0].endswith(":3:c") and obs[2].endswith(":3:c")
    obs, *_ = vec.step(["d", "d", "d"])
    assert obs[1].endswith(":1:d")
    vec.close()
    ref.close()


def test_process_workers_are_gone_after_close():
    vec = counters(2, 2, backend="process")
    processes = [w.process for w in vec.backend.workers]
    vec.close()
    assert all(not p.is_alive() and p.exitcode is not None for p in processes)  # exited and reaped
    assert not set(processes) & set(mp.active_children())
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(["a", "a"])


@pytest.mark.parametrize("backend", ["sync", "process"])
def test_dict_actions_step_only_the_given_envs(backend):
    vec = counters(3, 3, 3, backend=backend)
    first, _ = vec.reset()
    obs, rew, term, trunc, infos = vec.step({1: "x"})
    assert obs[0] == first[0] and obs[2] == first[2] and obs[1].endswith(":1:x")
    assert rew.tolist() == [0.0, 1.0, 0.0] and not term.any() and not trunc.any()
    assert infos["_count"].tolist() == [False, True, False]

    obs, *_ = vec.step({0: "y", 2: "z"})
    assert obs[0].endswith(":1:y") and obs[1].endswith(":1:x") and obs[2].endswith(":1:z")  # env 1 not stepped
    with pytest.raises(KeyError):
        vec.step({3: "a"})
    vec.close()


def test_a_pending_autoreset_waits_for_the_env_to_be_given_an_action():
    vec = counters(1, 3)
    vec.reset()
    obs, _, term, *_ = vec.step(["a", "a"])
    assert term.tolist() == [True, False]
    obs, rew, term, _, _ = vec.step({1: "b"})
    assert obs[0].endswith(":1:a") and rew[0] == 0.0 and not term[0]
    obs, *_ = vec.step({0: "c"})
    assert obs[0].startswith("start ")
    vec.close()


# --------------------------------------------------------------------------------------------------
# async API, wrappers, arguments


async def test_async_backend_steps_from_a_running_event_loop():
    vec = counters(2, 2, backend="async", seed=5)
    ref = counters(2, 2, seed=5)
    assert (await vec.areset()) [0] == ref.reset()[0]
    for actions in (["a", "b"], ["c", "d"], ["e", "f"]):
        got = await vec.astep(actions)
        want = ref.step(actions)
        assert got[0] == want[0] and got[1].tolist() == want[1].tolist() and got[2].tolist() == want[2].tolist()
    with pytest.raises(RuntimeError, match="astep"):
        vec.step(["a", "a"])
    vec.close()
    ref.close()


async def test_astep_works_on_the_process_backend_too():
    vec = counters(2, 2, backend="process")
    await vec.areset()
    obs, rew, *_ = await vec.astep(["a", "b"])
    assert obs[0].endswith(":1:a") and rew.tolist() == [1.0, 1.0]
    vec.close()


class Shout:
    """A wrapper (any callable env -> env) that upper-cases observations."""

    def __init__(self, env):
        self.env = env
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self.metadata, self.render_mode = env.metadata, None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs.upper(), info

    def step(self, action):
        obs, *rest = self.env.step(action)
        return (obs.upper(), *rest)

    def close(self):
        self.env.close()


@pytest.mark.parametrize("backend", ["sync", "async", "process"])
def test_wrappers_are_applied_in_order_on_every_backend(backend):
    tagged = []

    def tag(env):
        tagged.append(env)
        return env

    vec = make_vec(CounterEnv, num_envs=2, wrappers=(tag, Shout) if backend != "process" else (Shout,), backend=backend)
    obs, _ = vec.reset()
    assert all(o.startswith("START ") for o in obs)
    obs, *_ = vec.step(["x", "y"])
    assert obs[0].endswith(":1:X")
    if backend != "process":
        assert len(tagged) == 2 and all(isinstance(e, CounterEnv) for e in tagged)
    vec.close()


def test_make_vec_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        make_vec(["game:Wordle-v0", "game:Wordle-v0"], num_envs=3)
    with pytest.raises(UnknownEnvError):
        make_vec("game:Wordel-v0", num_envs=2)
    with pytest.raises(ValueError, match="backend"):
        make_vec("game:Wordle-v0", backend="gpu")
    vec = make_vec("game:Wordle-v0", num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        vec.step(["a", "b"])
    vec.reset()
    with pytest.raises(ValueError, match="2 envs"):
        vec.step(["a"])
    vec.close()


def test_make_vec_builds_batched_text_spaces_and_passes_env_kwargs():
    vec = make_vec("game:Wordle-v0", num_envs=3, max_turns=2)
    assert vec.num_envs == 3 and len(vec.observation_space) == 3
    assert vec.single_action_space.contains("any text at all")
    assert vec.get_attr("max_turns") == (2, 2, 2)
    vec.close()


def test_make_vec_is_exported_from_gem_core():
    import gem_core

    assert gem_core.make_vec is make_vec


# --------------------------------------------------------------------------------------------------
# concurrency: the thread and async backends really run the envs' steps at the same time


class RendezvousEnv(Env):
    """Its step waits at a barrier shared by every env of the batch: a batch completes only if all
    steps run concurrently (sequential steps would break the barrier after its timeout)."""

    def __init__(self, barrier=None, async_barrier=None):
        self.barrier, self.async_barrier = barrier, async_barrier

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {}

    def step(self, action):
        self.barrier.wait()
        return "met", 1.0, False, False, {}

    async def astep(self, action):
        await self.async_barrier.wait()
        return "met", 1.0, False, False, {}


def test_thread_backend_steps_envs_concurrently():
    import threading

    barrier = threading.Barrier(3, timeout=10)
    vec = make_vec(RendezvousEnv, num_envs=3, backend="thread", barrier=barrier)
    vec.reset()
    obs, _, _, trunc, infos = vec.step(["go"] * 3)
    assert obs == ("met",) * 3 and not trunc.any() and "error" not in infos
    vec.close()


async def test_async_backend_gathers_native_astep_calls():
    import asyncio

    vec = make_vec(RendezvousEnv, num_envs=3, backend="async", async_barrier=asyncio.Barrier(3))
    await vec.areset()
    obs, _, _, trunc, infos = await asyncio.wait_for(vec.astep(["go"] * 3), timeout=10)
    assert obs == ("met",) * 3 and not trunc.any() and "error" not in infos
    vec.close()


class UnpicklableInfoEnv(CounterEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"callback": lambda: None}


def test_process_backend_reports_an_unsendable_result_as_an_error():
    vec = make_vec([UnpicklableInfoEnv, CounterEnv], backend="process")
    vec.reset()
    obs, _, _, trunc, infos = vec.step(["a", "a"])
    assert trunc.tolist() == [True, False] and "cannot be sent" in infos["error"][0]
    assert obs[1].endswith(":1:a")
    vec.close()
