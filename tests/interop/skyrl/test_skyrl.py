"""SkyRL-Gym both ways with skyrl_gym's own registry and envs: every env it registers that runs offline
(on a row written here, or a SQLite file made here) played through make("skyrl:<id>") and the episode
runner with a scripted policy, its per-turn rewards equal to what SkyRL-Gym's own step returns for the
same actions; the envs that need a server or a database file refused with what they need; and GEM envs
made and stepped by skyrl_gym.make."""

from __future__ import annotations

import json
import socket
import sqlite3

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")

from gem_core import make  # noqa: E402
from gem_core.interop.skyrl import SkyRLEnvUnavailable, SkyRLTaskError, aggregate_metrics, register_gem_envs  # noqa: E402
from gem_core.registry import UnknownEnvError  # noqa: E402
from gem_core.rollout import run_episode, run_episodes  # noqa: E402
from gem_core.testing import ScriptedPolicy, make_tokenizer  # noqa: E402

QUESTION = [{"role": "system", "content": "Answer as '#### N'."}, {"role": "user", "content": "What is 6 * 12?"}]
LCB_TESTS = json.dumps([{"input": "3\n", "output": "6\n", "testtype": "stdin"}, {"input": "10\n", "output": "20\n", "testtype": "stdin"}])
DOUBLE = "```python\nprint(2 * int(input()))\n```"


@pytest.fixture(scope="module")
def sql_data(tmp_path_factory):
    """A Spider-layout database folder: sql_data/spider/database/shop/shop.sqlite."""
    root = tmp_path_factory.mktemp("sql_data")
    folder = root / "spider" / "database" / "shop"
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "shop.sqlite") as db:
        db.execute("CREATE TABLE item (name TEXT, price INTEGER)")
        db.executemany("INSERT INTO item VALUES (?, ?)", [("pen", 2), ("book", 12), ("lamp", 30)])
    return str(root)


def cases(sql_data):
    """(SkyRL id, task row, env_config, scripted actions) for every SkyRL-Gym env that runs offline."""
    gold = "SELECT name FROM item WHERE price > 10"
    return {
        "gsm8k": ({"prompt": QUESTION, "env_class": "gsm8k", "reward_spec": {"method": "rule", "ground_truth": "72"}}, None, ["6 * 12 = 72\n#### 72"]),
        "gsm8k_multi_turn": (
            {"prompt": QUESTION, "reward_spec": {"ground_truth": "72"}, "extra_info": {"max_turns": 3}}, None,
            ["#### 70", "no answer yet", "#### 72"],
        ),
        "aime": ({"prompt": QUESTION, "reward_model": {"ground_truth": "72"}}, None, ["so \\boxed{72}"]),
        "lcb": ({"prompt": [{"role": "user", "content": "Double n."}], "reward_spec": {"ground_truth": LCB_TESTS}}, None, [DOUBLE]),
        "text2sql": (
            {"prompt": [{"role": "user", "content": "Items over 10?"}], "db_id": "shop", "data": "spider",
             "reward_spec": {"ground_truth": gold}, "max_turns": 3},
            {"db_path": sql_data},
            [f"<think>look</think><sql>{gold}</sql>", f"<think>that is it</think><solution>{gold}</solution>"],
        ),
        "searchcode": (
            {"prompt": QUESTION, "reward_spec": {"ground_truth": "72"}, "max_turns": 3}, None,
            ["<tool><python>print(6 * 12)</python></tool>", "<solution>#### 72</solution>"],
        ),
    }


def skyrl_rewards(skyrl_id, row, env_config, actions):
    """What SkyRL-Gym's own make/init/step give for these actions (the loop SkyRL-train's generator runs)."""
    from omegaconf import OmegaConf

    from gem_core.interop.skyrl import _config

    env = skyrl_gym.make(skyrl_id, env_config=_config(skyrl_id, env_config) if env_config else OmegaConf.create({}),
                         extras={k: v for k, v in row.items() if k not in ("prompt", "env_class")})
    env.init(row["prompt"])
    rewards = []
    for action in actions:
        output = env.step(action)
        rewards.append(float(output["reward"]))
        if output["done"]:
            return rewards, env.get_metrics()
    raise AssertionError(f"{skyrl_id}: the scripted actions do not end the episode")


def test_every_offline_skyrl_env_plays_through_the_episode_runner_with_skyrl_s_own_rewards(sql_data):
    import asyncio

    tokenizer = make_tokenizer("chatml")
    offline = cases(sql_data)
    # Every env SkyRL-Gym registers is either played here or refused with what it needs (the next tests).
    assert set(skyrl_gym.registry) - {"search"} <= set(offline)  # search: its own test, against a loopback server
    for skyrl_id, (row, env_config, actions) in offline.items():
        expected, metrics = skyrl_rewards(skyrl_id, row, env_config, actions)
        env = make(f"skyrl:{skyrl_id}", row=row, env_config=env_config)
        trajectory = asyncio.run(run_episode(env, ScriptedPolicy(tokenizer, actions), tokenizer, seed=0))
        assert trajectory.actions == actions[: len(expected)], skyrl_id
        assert trajectory.rewards == expected, skyrl_id
        assert trajectory.terminated and not trajectory.truncated, skyrl_id
        assert trajectory.infos[-1]["skyrl_metrics"] == metrics, skyrl_id
    searchcode = make("skyrl:searchcode", row=offline["searchcode"][0])
    assert searchcode.reset(seed=0)[1]["skyrl_tool_groups"] == {"SearchToolGroup": ["search"], "PythonCodeExecutorToolGroup": ["python"]}
    # The inputs are chosen so the rewards say something: right answers score, per-turn rewards differ.
    assert skyrl_rewards("gsm8k", *offline["gsm8k"][:2], ["#### 72"])[0] == [1.0]
    assert skyrl_rewards("lcb", *offline["lcb"][:2], [DOUBLE])[0] == [1.0]
    assert skyrl_rewards("text2sql", *offline["text2sql"])[0] == [0, 1.0]
    multi = skyrl_rewards("gsm8k_multi_turn", *offline["gsm8k_multi_turn"])[0]
    assert len(set(multi)) == 3 and multi[-1] == 1.0


def test_the_first_observation_is_the_prompt_and_a_data_file_feeds_the_tasks(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {n} + {n}?"}], "reward_spec": {"ground_truth": str(2 * n)}} for n in (1, 2, 3)]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    env = make("skyrl:gsm8k", data_file=str(tmp_path / "tasks.jsonl"))
    observation, info = env.reset(options={"index": 2})
    assert observation == "What is 3 + 3?" and info["task_index"] == 2
    assert env.step("#### 6")[1:3] == (1.0, True)
    first = env.reset(seed=5)
    assert env.reset(seed=5) == first  # same seed, same task
    sys_env = make("skyrl:gsm8k", row={"prompt": QUESTION, "reward_spec": {"ground_truth": "72"}})
    assert sys_env.reset(seed=0)[0] == "Answer as '#### N'.\n\nWhat is 6 * 12?"


def test_skyrl_metrics_aggregate_with_skyrl_s_own_function():
    assert aggregate_metrics("skyrl:gsm8k_multi_turn", [{"steps": 1}, {"steps": 3}]) == {"avg_steps": 2.0}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def retrieval_server():
    """gem-retrieval-server's app over its shipped corpus under uvicorn on a loopback port (in a thread)."""
    import threading
    import time

    import uvicorn

    from gem_core.serve.asgi import listening_socket
    from gem_core.tools.retrieval_server import BM25Index, load_corpus, shipped_corpus_path
    from gem_core.tools.retrieval_server.server import create_app

    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(BM25Index(load_corpus(shipped_corpus_path()))), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/retrieve"
    server.should_exit = True
    thread.join(10)
    sock.close()


def test_skyrl_search_plays_against_gem_s_retrieval_server_with_skyrl_s_own_rewards(retrieval_server):
    import asyncio

    row = {"prompt": [{"role": "user", "content": "Which city is the capital of France?"}],
           "reward_spec": {"ground_truth": {"target": ["Paris"]}}, "max_turns": 3}
    config = {"search_url": retrieval_server, "log_requests": False}
    actions = ["<search>capital of France</search>", "<answer>Paris</answer>"]
    expected, _ = skyrl_rewards("search", row, config, actions)
    tokenizer = make_tokenizer("chatml")
    env = make("skyrl:search", row=row, env_config=config)
    trajectory = asyncio.run(run_episode(env, ScriptedPolicy(tokenizer, actions), tokenizer, seed=0))
    assert trajectory.rewards == expected == [0, 1.0] and trajectory.terminated
    assert "Eiffel Tower" in trajectory.observations[1]  # the passage came from the server


def test_envs_that_need_a_server_or_a_database_say_what_they_need(tmp_path):
    row = {"prompt": QUESTION, "reward_spec": {"ground_truth": "72"}}
    url = f"http://127.0.0.1:{free_port()}/retrieve"
    with pytest.raises(SkyRLEnvUnavailable, match=r"skyrl:search needs a Search-R1 retrieval server.*search_url"):
        make("skyrl:search", row=row, env_config={"search_url": url}).reset(seed=0)
    sql_row = {"prompt": QUESTION, "db_id": "shop", "data": "spider", "reward_spec": {"ground_truth": "SELECT 1"}}
    with pytest.raises(SkyRLEnvUnavailable, match=r"skyrl:text2sql needs a SQL database file.*db_path"):
        make("skyrl:text2sql", row=sql_row, env_config={"db_path": str(tmp_path)}).reset(seed=0)


def test_bad_input_names_the_env_and_the_fix(monkeypatch):
    with pytest.raises(UnknownEnvError, match=r"skyrl:gsm9k.*gsm8k.*skyrl_gym.register"):
        make("skyrl:gsm9k", row={"prompt": QUESTION})
    with pytest.raises(SkyRLTaskError, match=r"skyrl:gsm8k: pass exactly one task source"):
        make("skyrl:gsm8k")
    with pytest.raises(SkyRLTaskError, match=r"skyrl:gsm8k: the task row does not fit the env \(AssertionError: reward_spec field is required\)"):
        make("skyrl:gsm8k", row={"prompt": QUESTION}).reset(seed=0)

    import requests

    class NeedsNetwork(skyrl_gym.Env):
        def __init__(self, env_config=None, extras=None):
            requests.get(f"http://127.0.0.1:{free_port()}/dataset", timeout=2)

    skyrl_gym.register(id="test_needs_network", entry_point=NeedsNetwork)
    try:
        with pytest.raises(SkyRLEnvUnavailable, match=r"skyrl:test_needs_network: its constructor needs the network"):
            make("skyrl:test_needs_network", row={"prompt": QUESTION}).reset(seed=0)
    finally:
        skyrl_gym.envs.registration.deregister("test_needs_network")


ROW = {"prompt": QUESTION, "reward_spec": {"ground_truth": "72"}}


def test_a_malformed_task_file_is_refused_naming_the_file_and_line(tmp_path):
    jsonl = tmp_path / "tasks.jsonl"
    jsonl.write_text(json.dumps(ROW) + "\n\n{\"prompt\": oops}\n")
    with pytest.raises(SkyRLTaskError, match=rf"skyrl: {jsonl}:3: not JSON \(Expecting value, column 12\)"):
        make("skyrl:gsm8k", data_file=str(jsonl))
    listed = tmp_path / "tasks.json"
    listed.write_text("[\n" + json.dumps(ROW) + ",\n]\n")
    with pytest.raises(SkyRLTaskError, match=rf"skyrl: {listed}:3: not JSON"):
        make("skyrl:gsm8k", data_file=str(listed))
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    with pytest.raises(SkyRLTaskError, match=rf"skyrl: {binary} is not UTF-8 text"):
        make("skyrl:gsm8k", data_file=str(binary))


def test_task_rows_and_options_of_the_wrong_type_are_refused_naming_them():
    from gem_core.errors import InvalidArgumentType

    with pytest.raises(SkyRLTaskError, match=r"skyrl:gsm8k: rows\[1\] is a str, not a task row"):
        make("skyrl:gsm8k", rows=[ROW, "a"])
    env = make("skyrl:gsm8k", rows=[ROW, ROW])
    with pytest.raises(InvalidArgumentType, match=r"skyrl:gsm8k: options\['index'\] must be an integer.*got 'x'"):
        env.reset(options={"index": "x"})
    assert env.reset(options={"index": 3})[1]["task_index"] == 1  # wraps around, as before


def test_a_gem_env_whose_row_gives_a_max_turns_that_is_not_an_integer_is_refused_naming_it():
    register_gem_envs("game:GuessTheNumber-v0")
    with pytest.raises(SkyRLTaskError, match=r"game:GuessTheNumber-v0: the row's max_turns must be an integer, got 'abc'"):
        skyrl_gym.make("game:GuessTheNumber-v0", env_config={}, extras={"max_turns": "abc"})
    assert skyrl_gym.make("game:GuessTheNumber-v0", env_config={}, extras={"max_turns": 3}).max_turns == 3


def test_an_env_that_raises_mid_step_ends_its_episode_only():
    from skyrl_gym.envs.gsm8k.env import GSM8kEnv

    class Flaky(GSM8kEnv):
        def step(self, action):
            if "boom" in action:
                raise RuntimeError("tool crashed")
            return super().step(action)

    skyrl_gym.register(id="test_flaky", entry_point=Flaky)
    try:
        tokenizer = make_tokenizer("chatml")
        rows = [{"prompt": QUESTION, "reward_spec": {"ground_truth": "72"}}]
        policy = ScriptedPolicy(tokenizer, lambda ids: "boom" if "boom" in tokenizer.decode(ids) else "#### 72")
        import asyncio

        def factory_for(seed_text):
            def factory():
                return make("skyrl:test_flaky", rows=[{**rows[0], "prompt": [{"role": "user", "content": seed_text}]}])
            return factory

        good = asyncio.run(run_episode(factory_for("calm")(), policy, tokenizer, seed=0))
        bad = asyncio.run(run_episode(factory_for("boom")(), policy, tokenizer, seed=0))
        assert good.rewards == [1.0] and good.terminated
        assert bad.truncated and not bad.terminated and bad.rewards == [0.0]
        assert "skyrl:test_flaky: step raised RuntimeError: tool crashed" in bad.infos[-1]["error"]
        prompts = iter(["calm", "boom", "calm"])
        batch = asyncio.run(run_episodes(lambda: factory_for(next(prompts))(), policy, tokenizer, seeds=[0, 1, 2]))
        outcomes = sorted((t.truncated, t.rewards, "error" in t.infos[-1]) for t in batch)
        assert outcomes == [(False, [1.0], False), (False, [1.0], False), (True, [0.0], True)]  # one episode ended, the batch played
    finally:
        skyrl_gym.envs.registration.deregister("test_flaky")


def test_a_gem_env_through_skyrl_gym_s_own_registry_make_and_step():
    assert register_gem_envs("game:GuessTheNumber-v0") == ["game:GuessTheNumber-v0"]
    assert register_gem_envs(["game:GuessTheNumber-v0"]) == ["game:GuessTheNumber-v0"]  # twice is harmless
    local = make("game:GuessTheNumber-v0")
    env = skyrl_gym.make("game:GuessTheNumber-v0", env_config={}, extras={"seed": 3})
    chat, _ = env.init([{"role": "system", "content": "Play."}, {"role": "user", "content": "ignored"}])
    observation, _ = local.reset(seed=3)
    assert chat == [{"role": "system", "content": "Play."}, {"role": "user", "content": observation}]
    low, high, rewards, expected = 1, 20, [], []
    for _ in range(8):  # binary search: the reward at the end is the win's
        guess = (low + high) // 2
        output = env.step(f"\\boxed{{{guess}}}")
        o, r, terminated, truncated, _ = local.step(f"\\boxed{{{guess}}}")
        low, high = (guess + 1, high) if "higher" in o else (low, guess - 1) if "lower" in o else (low, high)
        rewards.append(output["reward"])
        expected.append(float(r))
        assert output["done"] == (terminated or truncated)
        assert output["observations"] == ([] if output["done"] else [{"role": "user", "content": o}])
        if output["done"]:
            break
    assert rewards == expected and max(rewards) > 0
    assert env.get_metrics()["return"] == pytest.approx(sum(expected))
    with pytest.raises(UnknownEnvError):
        register_gem_envs("game:NoSuchGame-v0")


def test_a_skyrl_task_as_an_adapter_dataset_label_plays_through_episode_session_from_label():
    """The path the row-receiving adapters (verl, OpenRLHF, RL2) take: a label naming skyrl:<env_class> with
    the SkyRL-train row as env_kwargs, EpisodeSession.from_label, the episode runner."""
    import asyncio

    from gem_core.rollout import EpisodeSession
    from gem_core.rollout.runner import run_session

    row = {"prompt": QUESTION, "env_class": "gsm8k_multi_turn", "reward_spec": {"ground_truth": "72"}, "extra_info": {"max_turns": 2}}
    label = json.dumps({"env_id": f"skyrl:{row['env_class']}", "seed": 0, "env_kwargs": {"row": row}})
    actions = ["#### 71", "#### 72"]
    tokenizer = make_tokenizer("chatml")
    trajectory = asyncio.run(run_session(EpisodeSession.from_label(label, tokenizer), ScriptedPolicy(tokenizer, actions)))
    expected, _ = skyrl_rewards("gsm8k_multi_turn", row, None, actions)
    assert trajectory.rewards == expected and expected[-1] == 1.0 and 0 < expected[0] < 1
    assert sum(trajectory.token_rewards) == pytest.approx(sum(expected))  # per-turn rewards on the turns' last tokens


METRICS_RAISE = {"observations": [], "reward": 1.0, "done": True, "metadata": {}}  # its env's get_metrics raises


@pytest.mark.parametrize("output", [
    {"observations": [], "reward": "high", "done": True, "metadata": {}},
    {"observations": [], "reward": [1.0, 2.0], "done": True, "metadata": {}},
    {"observations": [], "reward": float("nan"), "done": True, "metadata": {}},
    {"observations": [], "reward": 1.0, "done": False, "metadata": [1, 2]},
    METRICS_RAISE,
    ("obs", 1.0, True, {}),
    None,
])
def test_a_broken_env_s_step_output_ends_its_episode_with_the_error(output):
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    closed = []

    class Broken(BaseTextEnv):
        def __init__(self, env_config=None, extras=None):
            super().__init__()

        def init(self, prompt):
            return prompt, {}

        def step(self, action):
            return output

        def get_metrics(self):
            if output is METRICS_RAISE:
                raise ZeroDivisionError("metrics bug")
            return {}

        def close(self):
            closed.append(True)

    skyrl_gym.register(id="test_broken_output", entry_point=Broken)
    try:
        env = make("skyrl:test_broken_output", row={"prompt": QUESTION})
        env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step("answer")
        assert (observation, reward, terminated, truncated) == ("", 0.0, False, True)
        assert info["error"].startswith("skyrl:test_broken_output: step ") and closed == [True]
        env.close()
    finally:
        skyrl_gym.envs.registration.deregister("test_broken_output")


@pytest.mark.parametrize("result", [("hi", ["not", "a", "dict"]), (12345, {}), None])
def test_a_broken_env_s_init_output_is_refused_naming_the_env(result):
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    class Broken(BaseTextEnv):
        def __init__(self, env_config=None, extras=None):
            super().__init__()

        def init(self, prompt):
            return result

    skyrl_gym.register(id="test_broken_init", entry_point=Broken)
    try:
        env = make("skyrl:test_broken_init", row={"prompt": QUESTION})
        with pytest.raises(SkyRLTaskError, match=r"skyrl:test_broken_init: its init\(prompt\) must give back"):
            env.reset(seed=0)
        env.close()
    finally:
        skyrl_gym.envs.registration.deregister("test_broken_init")
