"""An agent program on the SWE tasks (:mod:`gem_core.envs.swe`): the task's repository as its working
directory, the task's issue as its prompt, and the task's own tests as its grader.

A task is an episode label (:class:`~gem_core.rows.label.EpisodeLabel`, or its JSON or mapping form) of a
``swe:*`` env, as every adapter's dataset row carries one: the env is made and reset with the label's seed
(so a seed picks the same task as the env episode would), its working tree is copied into the run's
working directory, and the env is closed. The agent then works on plain files with its own tools, and
:func:`~gem_core.envs.swe.grading.grade_tree` grades the tree it left, in the sandbox, exactly as the env
grades a ``submit``: the fraction of the fail-to-pass tests that pass (0.0 if a pass-to-pass test fails), or
with ``reward="binary"`` 1.0 only when every listed test passes.

The agent program itself is not sandboxed: it is the user's own program, run as the user (put it in a
container of its own where it runs model-written commands).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core.agent.program import AgentCommand, AgentProgram, AgentRun, TaskSetup
from gem_core.envs.swe.pack import SweError, SweTask
from gem_core.errors import GemError

__all__ = ["swe_agent_program"]


@dataclass(frozen=True)
class _Grading:
    pristine: Path
    task: SweTask
    sandbox: str
    reward: str


def _label(task: Any) -> Any:
    from gem_core.rows.label import EpisodeLabel, parse_label

    if isinstance(task, EpisodeLabel):
        return task
    if isinstance(task, (str, Mapping)):
        return parse_label(task)
    raise SweError(f"a SWE agent task is an episode label of a swe:* env (env_id, seed, env_kwargs), got {type(task).__name__}")


def _prompt(task: SweTask) -> str:
    return (
        f"You are working in the repository of the Python package {task.package.name} {task.package.version}, which is "
        f"your current working directory. A user filed this issue:\n\n{task.issue}\n\n"
        "Fix the library so the behaviour the issue asks for holds; the package's own tests grade your fix when you exit."
    )


def _setup(task: Any, workdir: Path) -> TaskSetup:
    from gem_core.envs.swe.grading import copy_tree
    from gem_core.envs.swe.swe_env import SweEnv
    from gem_core.registry import make

    label = _label(task)
    env = make(label.env_id, **label.env_kwargs)
    try:
        swe = env.unwrapped
        if not isinstance(swe, SweEnv):
            raise SweError(f"{label.env_id!r} is not a SWE env; swe_agent_program runs tasks of swe:* envs")
        swe.reset(seed=label.seed)
        task, work_dir = swe._swe_episode()
        copy_tree(work_dir.path, workdir)
        grading = _Grading(swe.tasks_dir / task.id, task, swe.sandbox, swe.reward_mode)
    finally:
        env.close()
    return TaskSetup(prompt=_prompt(grading.task), data=grading)


def _grade(run: AgentRun) -> float:
    from gem_core.envs.swe.grading import grade_tree

    grading: _Grading = run.setup.data
    grade = grade_tree(run.workdir, grading.pristine, grading.task, mode=grading.sandbox)
    run.info.update(success=grade.resolved, tests_passed=grade.passed, tests_total=len(grade.tests), changed=list(grade.changed))
    if grade.error:
        run.info["grade_error"] = grade.error
    return grade.fraction if grading.reward == "fraction" else float(grade.resolved)


def swe_agent_program(
    command: AgentCommand, *, time_limit: float = 600.0, max_turns: int | None = None, env: dict[str, str] | None = None
) -> AgentProgram:
    """An :class:`~gem_core.agent.program.AgentProgram` whose tasks are SWE episode labels (see the module docstring).

    Args:
        command: the agent program (it reads its task from ``$GEM_TASK_PROMPT``, or the file ``$GEM_TASK_PROMPT_FILE``,
            and works in its current directory).
        time_limit: seconds the program may run before it is killed and its episode truncated.
        max_turns: calls the program may make (None: no limit).
        env: extra environment variables for the program.

    Raises:
        GemError: a bad ``time_limit`` or ``max_turns`` (when a run's task is not a SWE label, that run raises ``SweError``).
    """
    if env is not None and not isinstance(env, dict):
        raise GemError(f"swe_agent_program env must be a dict of environment variables, got {type(env).__name__}")
    return AgentProgram(command=command, time_limit=time_limit, max_turns=max_turns, grader=_grade, env=dict(env or {}), setup=_setup)
