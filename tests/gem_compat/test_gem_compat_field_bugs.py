"""Field bugs of ``import gem`` against gem-llm 0.1.0: the same id or entry point must give a GEM user the same env.

Each expectation below was checked against gem-llm 0.1.0 in its own venv (see tests/gem_upstream for the
side-by-side runs); the values are computed here the way GEM 0.1.0 computes them.
"""

from __future__ import annotations

import json
import random

import pytest

datasets = pytest.importorskip("datasets")


def test_rg_ids_are_gems_reasoning_gym_env() -> None:
    """rg:* ids under ``import gem`` built the core's ReasoningGym env (10,000 puzzles, an answer-tag hint in the
    question, -0.1 for no \\boxed{}, episodes ending (True, False)) instead of GEM's 500-puzzle pool (seed 42)
    whose seeded reset is ``random.seed(s); random.choice(pool)`` and which ends (True, True)."""
    rg = pytest.importorskip("reasoning_gym")
    import gem

    pool = rg.create_dataset("basic_arithmetic", size=500, seed=42)
    env = gem.make("rg:basic_arithmetic")
    assert env.size == 500
    observation, _ = env.reset(seed=5)
    assert observation == random.Random(5).choice(pool)["question"]
    _, reward, terminated, truncated, _ = env.step("I am not sure.")
    assert (reward, terminated, truncated) == (0.0, True, True)
    fresh = gem.make("rg:basic_arithmetic")
    assert fresh.reset()[0] == pool[0]["question"]
    answer = pool[0]["answer"]
    assert fresh.step(f"\\boxed{{{answer}}}")[1] == 1.0


def _math_rows(tmp_path) -> str:
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps({"problem": f"What is {i}+{i}?", "answer": str(2 * i)}) + "\n" for i in range(20)))
    return str(path)


def test_math_env_entry_point_is_gems(tmp_path) -> None:
    """gem.envs.math_env:MathEnv was the core's MathEnv: a prompt suffix after the question, -0.1 for an answer
    without \\boxed{}, episodes ending (True, False), and seeded resets picking another row than GEM's
    ``random.seed(s); rows.shuffle(seed=0)[random.randint(0, n - 1)]``."""
    from gem.envs.math_env import MathEnv

    rows = _math_rows(tmp_path)
    shuffled = datasets.Dataset.from_json(rows).shuffle(seed=0)
    gem_row = shuffled[random.Random(3).randint(0, len(shuffled) - 1)]
    env = MathEnv(data_files=rows)
    observation, _ = env.reset(seed=3)
    assert observation == gem_row["problem"]
    _, reward, terminated, truncated, _ = env.step(f"The answer is {gem_row['answer']}")
    assert (reward, terminated, truncated) == (0.0, True, True)
    env.reset(seed=3)
    assert env.step(f"\\boxed{{{gem_row['answer']}}}")[1:4] == (1.0, True, True)
    # unseeded resets walk the shuffled rows in order
    walker = MathEnv(data_files=rows)
    assert [walker.reset()[0] for _ in range(3)] == [shuffled[i]["problem"] for i in range(3)]


def test_qa_env_entry_point_shows_gems_template(tmp_path) -> None:
    """gem.envs.qa_env:QaEnv showed the core's question plus its \\boxed{} hint, not GEM's <answer>-tag template,
    and paid -0.1 (GEM 0.0) for an answer without tags, ending (True, False)."""
    from gem.envs.qa_env import QaEnv

    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"question": "What is the capital of France?", "answer": ["Paris"]}) + "\n")
    env = QaEnv(data_files=str(path))
    observation, _ = env.reset()
    assert observation == (
        "For any question, always reason through your thought process using:\n<think> your reasoning here </think>\n"
        "Then, provide your final answer using:\n<answer> your answer here </answer>\n\n"
        "Question: What is the capital of France?\n"
    )
    assert env.step("Paris")[1:4] == (0.0, True, True)
    env.reset()
    assert env.step("<think>easy</think><answer> paris </answer>")[1:4] == (1.0, True, True)


def test_dataset_argument_is_accepted() -> None:
    """MathEnv(dataset=ds) and QaEnv(dataset=ds) raised a raw TypeError, and GEM's Tinker example (which passes
    env.dataset back to gem.make for rg:simple_equations) got InvalidArgumentType."""
    pytest.importorskip("reasoning_gym")
    import gem
    from gem.envs.math_env import MathEnv
    from gem.envs.qa_env import QaEnv

    ds = datasets.Dataset.from_dict({"problem": ["What is 1+1?"], "question": ["Capital of France?"], "answer": ["2"]})
    assert MathEnv(dataset=ds).reset()[0] == "What is 1+1?"
    assert "Capital of France?" in QaEnv(dataset=ds).reset()[0]
    first = gem.make("rg:simple_equations", seed=1, use_mp=False)
    dataset = first.dataset if hasattr(first, "dataset") else None
    second = gem.make("rg:simple_equations", seed=0, dataset=dataset, use_mp=False)
    assert second.reset()[0]


def test_gem_010_public_names() -> None:
    """gem.multiagent, gem.envs.reasoning_gym:ReasoningGymEnv and env.entry_point (set by GEM's make) were
    missing: ImportError / DependencyNotInstalled / AttributeError."""
    pytest.importorskip("reasoning_gym")
    import gem
    from gem.multiagent import AgentSelector, MultiAgentEnv

    assert AgentSelector and MultiAgentEnv
    gem.register("rg:mine-field-bugs", "gem.envs.reasoning_gym:ReasoningGymEnv", name="leg_counting", size=10, seed=1)
    env = gem.make("rg:mine-field-bugs")
    assert env.reset()[0]
    assert env.entry_point == "gem.envs.reasoning_gym:ReasoningGymEnv"
    assert gem.make("game:GuessTheNumber-v0-easy").entry_point == "gem.envs.game_env.guess_the_number:GuessTheNumberEnv"


def test_wrappers_forward_public_attributes() -> None:
    """GEM's wrappers expose the wrapped env's public attributes (wrapped.env_id, .max_turns, .min_number); here
    each raised AttributeError through the gymnasium-based wrappers."""
    import gem
    from gem.wrappers.wrapper_factory import get_wrapper_fns

    env = gem.make("game:GuessTheNumber-v0-easy")
    for wrap in get_wrapper_fns("concat_with_action,episode_tracking"):
        env = wrap(env)
    assert (env.env_id, env.max_turns, env.min_number, env.max_number) == ("game:GuessTheNumber-v0-easy", 4, 1, 10)
    with pytest.raises(AttributeError):
        env._private_name_never_forwarded  # noqa: B018


@pytest.mark.parametrize(
    ("env_id", "dataset", "split"),
    [
        ("math:GSM8K", "axon-rl/GSM-8k", "train"),
        ("math:DeepScaleR40K", "axon-rl/DeepScaleR-40K", "train"),
        ("qa:NaturalQuestions", "axon-rl/NaturalQuestions", "train"),
        ("qa:HotpotQA", "axon-rl/HotpotQA", "train"),
        ("eval:MATH500", "axon-rl/math-eval", "math"),
        ("eval:AIME24", "axon-rl/math-eval", "aime24"),
        ("logic:RuleTaker-d1", "axon-rl/RuleTaker-d1-70k", "train"),
        ("eval:Bamboogle", "axon-rl/search-eval", "bamboogle"),
    ],
)
def test_gem_dataset_ids_read_gems_datasets(env_id: str, dataset: str, split: str) -> None:
    """Several GEM ids loaded another hub dataset than gem-llm 0.1.0 registers (math:GSM8K read openai/gsm8k,
    eval:MATH500 HuggingFaceH4/MATH-500, ...) through the core's env classes, not GEM's entry points."""
    from gem.envs.registration import spec

    env_spec = spec(env_id)
    assert (env_spec.kwargs["dataset_name"], env_spec.kwargs.get("split", "train")) == (dataset, split)
    assert env_spec.entry_point in ("gem.envs.math_env:MathEnv", "gem.envs.qa_env:QaEnv")
