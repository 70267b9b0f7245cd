"""GEM's documented usage run against the ``gem`` layer, written as a GEM user writes it: the README's
Interface example, GETTING_STARTED's tool examples, ``examples/register_new_env.py`` and the calls the
training examples make (``make_vec`` with ``vec_kwargs``/``wrappers``/``async_mode``, ``get_wrapper_fns``).

Only what needs the internet is changed, each on a line marked ``# changed:``: the tokenizer is the
suite's in-process one instead of ``AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")``, hub datasets are
read from the shipped sample, and the search server is the local retrieval server on its own port.

The folder is ``tests/gem_compat``, not ``tests/gem``: pytest puts ``tests/`` on ``sys.path``, where a
``gem`` folder would be found as a namespace package before an editable install's finder is asked.
"""

from __future__ import annotations

import os
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest
from ci_guard import needs

import gem
from gem.core import Env
from gem.envs.registration import register
from gem.utils.constants import TERMINAL_STATE
from gem.utils.parsing import extract_last_boxed_answer
from gem.envs.registration import spec as gem_spec  # GEM's ids, GEM's argument names
from gem_core import registry, spec

REPO = Path(__file__).resolve().parents[2]
MATH_SAMPLE = spec("math:Sample").sample_kwargs["data_files"]

#: Upstream GEM's WRAPPER_FACTORY names (gem/wrappers/wrapper_factory.py at 4069f2f).
GEM_WRAPPER_NAMES = {
    "python_tool", "python_tool_no_int_reward", "python_tool_no_int_reward_last_line_error", "search_tool",
    "search_tool_no_int_reward", "concat", "concat_chat", "concat_with_action", "concat_chat_on_reset", "episode_tracking",
}



def python_sandbox_usable() -> bool:
    from gem_core.tools import sandbox

    return "bwrap" in sandbox.available_modes()


# --- README: Interface ---------------------------------------------------------------------------------


def test_readme_interface_example_runs(capsys):
    # List all supported environments
    gem.print_envs()

    # Initialize the environment
    env = gem.make("game:GuessTheNumber-v0")

    # Reset the environment to generate the first observation
    observation, info = env.reset()

    # Start the agent-environment loop (GuessTheNumber-v0's 8-turn limit ends it)
    while True:
        action = env.sample_random_action()  # insert policy here
        next_observation, reward, terminated, truncated, info = env.step(action)
        print("OBS", observation)
        print("ACT", action)
        observation = next_observation
        # Exit when the episode terminates
        if terminated or truncated:
            break

    out = capsys.readouterr().out
    assert "  - game:GuessTheNumber-v0:" in out and "Entry Point:" in out
    # GEM's dataset ids are GEM's envs (gem.envs.math_env), listed with their entry point; other upstream
    # ids are listed with what they name here
    assert "  - eval:AMC:\n      Entry Point: gem.envs.math_env:MathEnv" in out
    assert "webshop:train-html" in out and "catalogue" in out
    assert out.count("ACT \\boxed{") >= 1


def test_acceptance_command_runs_in_a_fresh_interpreter():
    command = "import gem; gem.print_envs(); e = gem.make('game:GuessTheNumber-v0'); e.reset(seed=0)"
    done = subprocess.run([sys.executable, "-c", command], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "game:GuessTheNumber-v0" in done.stdout


def test_import_gem_stays_light():
    probe = "import sys, gem; print(sorted(m for m in ('datasets', 'torch', 'transformers', 'httpx', 'gem_core.envs') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


# --- GETTING_STARTED: Tool Integration Examples --------------------------------------------------------


@needs(python_sandbox_usable(), "the Python tool's sandbox (bubblewrap) cannot run here")
def test_getting_started_python_tool_example(tiny_tokenizer):
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    env = gem.make("math:GSM8K", **gem_spec("math:GSM8K").sample_kwargs)  # changed: the shipped sample, not the hub
    tool = PythonCodeTool()
    wrapped_env = ToolEnvWrapper(env, tools=[tool])
    wrapped_env = WRAPPER_FACTORY["concat_chat"](
        wrapped_env, tokenizer=tiny_tokenizer  # changed: the in-process tokenizer
    )
    obs, info = wrapped_env.reset()

    # we ignore the obs and use a dummy action
    dummy_action = "<think>Let me compare 9.9 and 9.11 using python.</think><python>print('9.9 > 9.11?', 9.9 > 9.11)</python>"
    obs, reward, terminated, truncated, info = wrapped_env.step(dummy_action)
    print(obs)
    wrapped_env.close()

    assert "9.9 > 9.11? True" in obs
    assert info["use_tool"] is True and info["tool_use_counter"] == 1 and info["tool_success_counter"] == 1
    assert not terminated and not truncated
    # concat_chat: the whole conversation in the chat template, the tool's answer as a tool turn (GEM's
    # roles), ending with the generation prompt
    assert obs.count("<|im_start|>user") == 1 and obs.count("<|im_start|>tool") == 1
    assert dummy_action in obs and obs.endswith("<|im_start|>assistant\n")


def test_getting_started_search_tool_example(retrieval_server, tiny_tokenizer):
    from gem.tools.search_tool import SearchTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    # interact using search tool
    env = gem.make("game:GuessTheNumber-v0", max_turns=2)
    tool = SearchTool(search_url=retrieval_server.url, topk=2)  # changed: the local retrieval server's port
    wrapped_env = ToolEnvWrapper(env, tools=[tool], max_tool_uses=1)
    wrapped_env = WRAPPER_FACTORY["concat_chat"](wrapped_env, tokenizer=tiny_tokenizer)  # changed: in-process tokenizer
    wrapped_env.reset()

    dummy_action = "<think>I need to search for Python list comprehension examples</think><search>Python list comprehension examples</search>"
    obs, reward, terminated, truncated, info = wrapped_env.step(dummy_action)
    print(obs)

    assert "Python" in obs and "<information>" in obs
    assert info["use_tool"] is True and info["tool_use_counter"] == 1
    # max_tool_uses=1: the next search is not run, the action goes to the game (a malformed guess)
    obs, reward, terminated, truncated, info = wrapped_env.step("<search>more</search>")
    assert info["use_tool"] is False and info.get("format_error") is True


# --- examples/register_new_env.py ----------------------------------------------------------------------


class ReverseStringEnv(Env):
    """Upstream's example env, unchanged (it draws from the global ``random``; see gem.core)."""

    def __init__(self, str_len: int = 5):
        super().__init__()
        self.str_len = str_len

    def _get_instructions(self) -> str:
        return (
            "You are tasked to reverse a given string.\n"
            "You may provide your response in any manner. Only the content wrapped inside \\boxed{} will be considered as your final answer.\n"
            f"Please reverse the string: {self.gt_str}.\n"
        )

    def reset(self, seed=None):
        super().reset(seed)
        characters = string.ascii_letters + string.digits  # A-Z, a-z, 0-9
        self.gt_str = "".join(random.choices(characters, k=self.str_len))
        return self._get_instructions(), {}

    def step(self, action):
        clean_action = extract_last_boxed_answer(action)
        if clean_action is None:
            reward = 0
        else:
            reward = float(clean_action[::-1] == self.gt_str)
        return TERMINAL_STATE, reward, True, True, {}


def test_register_new_env_example_case_1_new_math_dataset():
    register(
        "math:GSM8K-Example",
        "gem.envs.math_env:MathEnv",
        dataset_name="axon-rl/GSM-8k",
        question_key="problem",
        answer_key="answer",
    )

    env = gem.make("math:GSM8K-Example", data_files=MATH_SAMPLE)  # changed: a local copy, not the hub
    obs, _ = env.reset()
    assert obs  # i.e., question

    action = "\\boxed{" + env.gold + "}"  # the sample's own answer, so the grade is known
    next_obs, reward, _, _, _ = env.step(action)
    assert reward == 1.0


def test_register_new_env_example_case_1_offline_names_the_dataset():
    register("math:GSM8K-Example", "gem.envs.math_env:MathEnv", dataset_name="axon-rl/GSM-8k", question_key="problem", answer_key="answer")
    probe = (
        "import gem\n"
        "gem.register('math:GSM8K-Example', 'gem.envs.math_env:MathEnv', dataset_name='axon-rl/GSM-8k', question_key='problem', answer_key='answer')\n"
        "try:\n    gem.make('math:GSM8K-Example')\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    if "DatasetUnavailableError" not in done.stdout:
        pytest.skip("axon-rl/GSM-8k is in the local Hugging Face cache")
    assert "'axon-rl/GSM-8k'" in done.stdout and "data_files=" in done.stdout


def test_register_new_env_example_case_2_new_env():
    register(
        "game:ReverseString",
        ReverseStringEnv,  # changed: the class itself, since this module is not importable as examples.register_new_env
    )

    env = gem.make("game:ReverseString")
    obs, _ = env.reset()
    assert "Please reverse the string" in obs  # i.e., question

    action = "\\boxed{" + env.gt_str[::-1] + "}"  # hack to get the gt
    next_obs, reward, _, _, _ = env.step(action)
    assert (next_obs, reward) == (TERMINAL_STATE, 1.0)


def test_gem_env_written_the_gem_way_runs_under_core_wrappers_and_vector_envs():
    register("game:ReverseString", ReverseStringEnv)
    vec = gem.make_vec(["game:ReverseString"] * 2, async_mode=True)  # the vector env resets with options=None
    observations, _ = vec.reset()
    assert all("Please reverse the string" in o for o in observations)
    vec.close()
    env = ReverseStringEnv()
    with pytest.raises(TypeError, match="takes no options"):
        env.reset(options={"level": 2})


def test_positional_seed_seeds_the_envs_own_generator():
    class Draw(Env):
        def reset(self, seed=None):
            super().reset(seed)
            return str(self.np_random.integers(10**9)), {}

        def step(self, action):
            return TERMINAL_STATE, 0.0, True, False, {}

    env = Draw()
    first = env.reset(7)
    state = random.getstate()
    assert env.reset(7) == first and env.reset(8) != first
    assert random.getstate() == state  # the process-wide generator is neither seeded nor drawn from


# --- the training examples' calls ----------------------------------------------------------------------


def test_make_with_seed_fixes_the_stream_of_episodes():
    def questions(seed):
        env = gem.make("math:GSM8K", seed=seed, **gem_spec("math:GSM8K").sample_kwargs)
        return [env.reset()[0] for _ in range(4)]

    assert questions(5) == questions(5)
    assert questions(5) != questions(6)


def test_make_vec_as_the_training_examples_call_it():
    from gem.wrappers.wrapper_factory import get_wrapper_fns

    def play(async_mode):
        vec = gem.make_vec(
            ["game:GuessTheNumber-v0"] * 3,
            vec_kwargs=[{"seed": 233 + i} for i in range(3)],
            wrappers=get_wrapper_fns("concat_with_action,episode_tracking", tokenizer=None),
            async_mode=async_mode,
        )
        observations, _ = vec.reset()
        trace = [observations]
        for guess in (10, 5, 15):
            observations, rewards, terminated, truncated, infos = vec.step(["\\boxed{%d}" % guess] * 3)
            ended = (terminated | truncated).tolist()
            trace.append((observations, rewards.tolist(), [info["step_counter"] for info in infos], ended))
        vec.close()
        return trace

    sync, asynchronous = play(False), play(True)
    assert sync == asynchronous  # same seeds, same episodes, whichever backend
    assert "\n\\boxed{10}\n" in sync[1][0][0]  # concat_with_action keeps the actions, each on its own line
    # GEM's SAME_STEP autoreset: an env whose episode ended already shows its next episode's counters
    assert sync[1][2] == [0 if ended else 1 for ended in sync[1][3]]


def test_make_vec_takes_one_id_and_checks_vec_kwargs():
    vec = gem.make_vec("game:GuessTheNumber-v0")
    assert vec.num_envs == 1
    vec.close()
    with pytest.raises(ValueError, match="one per env"):
        gem.make_vec(["game:GuessTheNumber-v0"] * 2, vec_kwargs=[{}])
    with pytest.raises(registry.UnknownEnvError):
        gem.make_vec(["game:NoSuchGame-v0"])


def test_wrapper_factory_has_gems_names():
    from gem.wrappers.wrapper_factory import TOKENIZER_REQUIRED, WRAPPER_FACTORY, get_wrapper_fns

    assert set(WRAPPER_FACTORY) == GEM_WRAPPER_NAMES
    assert set(TOKENIZER_REQUIRED) == {"concat_chat", "concat_chat_on_reset"}
    with pytest.raises(KeyError, match="Unknown wrapper 'concat_typo'"):
        get_wrapper_fns("concat,concat_typo")


def test_concat_keeps_every_observation_and_concat_chat_on_reset_templates_the_first(tiny_tokenizer):
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    env = WRAPPER_FACTORY["concat"](gem.make("game:GuessTheNumber-v0"))
    first, _ = env.reset(seed=1)
    second, *_ = env.step("\\boxed{7}")
    assert second.startswith(first) and len(second) > len(first) and "\\boxed{7}" not in second

    env = WRAPPER_FACTORY["concat_chat_on_reset"](gem.make("game:GuessTheNumber-v0"), tokenizer=tiny_tokenizer)
    first, _ = env.reset(seed=1)
    assert first.startswith("<|im_start|>user") and first.endswith("<|im_start|>assistant\n")
    second, *_ = env.step("\\boxed{7}")
    assert second.startswith(first + "\\boxed{7}\n") and second.count("<|im_start|>") == 2  # GEM's newline joiner
    with pytest.raises(ValueError, match="tokenizer"):
        WRAPPER_FACTORY["concat_chat"](gem.make("game:GuessTheNumber-v0"))


def test_episode_tracking_reports_gems_counters():
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    env = WRAPPER_FACTORY["episode_tracking"](gem.make("game:GuessTheNumber-v0", max_turns=2))
    _, info = env.reset(seed=0)
    assert (info["step_counter"], info["cumulative_rewards"]) == (0, 0.0)
    total = 0.0
    for _ in range(2):
        _, reward, terminated, truncated, info = env.step("nonsense")
        total += reward
    assert info["step_counter"] == 2 and info["cumulative_rewards"] == pytest.approx(total) and "episode" in info
    _, info = env.reset()
    assert info["prev_ep_step_counter"] == 2 and info["step_counter"] == 0


@needs(python_sandbox_usable(), "the Python tool's sandbox (bubblewrap) cannot run here")
def test_python_tool_wrapper_pays_gems_intermediate_rewards():
    from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

    env = WRAPPER_FACTORY["python_tool"](gem.make("math:GSM8K", **gem_spec("math:GSM8K").sample_kwargs))
    env.reset(seed=0)
    _, clean, *_ = env.step("<python>print(1)</python>")
    _, failing, *_ = env.step("<python>raise SystemExit(3)</python>")
    assert clean == pytest.approx(0.05 + 0.25) and failing == pytest.approx(0.05)


def test_gem_tool_methods():
    from gem.tools.search_tool import SearchTool

    tool = SearchTool(search_url="http://127.0.0.1:9/retrieve", topk=1, timeout=0.5)
    assert "<search>" in tool.instruction_string() and tool.tool_type == "search"
    assert tool.execute_action("no call here") == (False, True, "", "no call here")
    found, failed, observation, parsed = tool.execute_action("<search>owls</search> and more")
    assert (found, failed, parsed) == (True, True, "<search>owls</search>") and observation  # nothing listens on port 9


def test_tool_env_wrapper_checks_gems_reward_rules():
    from gem.tools.search_tool import SearchTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    env = gem.make("game:GuessTheNumber-v0")
    with pytest.raises(ValueError, match="negative"):
        ToolEnvWrapper(env, tools=[SearchTool()], tool_execute_error_reward=0.5)
    with pytest.raises(ValueError, match="replaces"):
        ToolEnvWrapper(env, tools=[SearchTool()], tool_reward=0.1, tool_execute_error_reward=-0.5)


@needs(python_sandbox_usable(), "the Python tool's sandbox (bubblewrap) cannot run here")
def test_tool_wrapper_reports_the_previous_episodes_tool_counts_on_reset():
    # GEM's oat and verl examples log tool use from info["prev_ep_tool_use_counter"] when an episode ends
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=[PythonCodeTool()])
    _, info = env.reset(seed=0)
    assert (info["prev_ep_tool_use_counter"], info["prev_ep_tool_success_counter"]) == (0, 0)
    env.step("<python>print(1)</python>")
    env.step("<python>raise SystemExit(3)</python>")
    _, info = env.reset(seed=1)
    assert (info["prev_ep_tool_use_counter"], info["prev_ep_tool_success_counter"]) == (2, 1)
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (0, 0)
