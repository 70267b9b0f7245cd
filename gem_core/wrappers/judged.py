"""Judged rewards: any env's answers scored by a judge model against a rubric.

``Judged(env, judge, rubric)`` sends the episode's final answer (``on="final"``) or every answer
(``on="turn"``) to a :class:`~gem_core.judge.Judge` together with the task (the first observation) and a
reference answer where the env has one, and pays the verdict's reward in [0, 1] instead of the env's
(``reward="replace"``) or on top of it (``reward="add"``). The env's own reward stays in
``info["env_reward"]`` and the whole verdict (scores, reason, the judge's raw reply, model, rubric digest,
cache key) in ``info["judge"]``, so exported trajectories carry what each reward was decided from.

A judge that cannot answer (unreachable, slow, rate limiting, answering garbage) pays 0 with
``info["error"]``; the episode goes on, or is truncated when ``truncate_on_error=True``. An action the
env itself could not parse (``info["format_error"]``) keeps the env's format penalty and is not judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gem_core.env import Env, StepResult, log_error_once
from gem_core.errors import InvalidArgument, InvalidArgumentType
from gem_core.judge.client import Judge, Verdict
from gem_core.judge.rubric import Rubric
from gem_core.wrappers.core import Wrapper

__all__ = ["Judged", "ReferenceSource", "NO_JUDGE"]

ReferenceSource = str | Callable[[Any], "str | None"] | None
"""Where the reference answer comes from: a fixed text, or a function of the (unwrapped) env; None reads
the env's ``judge_reference`` attribute when it has one.
"""

NO_JUDGE = "judge: no judge configured; pass judge=Judge(url, model) (gem eval/replay: --judge-url URL --judge-model NAME)"
"""The verdict error of a :class:`Judged` env built without a judge: it scores 0 and says how to configure one."""


class Judged(Wrapper):
    """Wraps an env so that a judge model scores its answers.

    Args:
        env: the env whose actions are answers.
        judge: the :class:`~gem_core.judge.Judge`; None makes every judged step pay 0 with ``info["error"]``
            naming the fix (so a registered judged env still builds and steps without one).
        rubric: a :class:`~gem_core.judge.Rubric`, plain data or a JSON file path (default
            :data:`~gem_core.judge.DEFAULT_RUBRIC`).
        on: ``"final"`` judges the answer that ends the episode, ``"turn"`` every answer.
        reward: ``"replace"`` pays the verdict's reward on judged steps; ``"add"`` adds it to the env's.
        reference: see :data:`ReferenceSource`.
        truncate_on_error: truncate the episode when the judge gives no verdict (default: go on).
        close_judge: :meth:`close` closes the judge too (for a judge this env built; a shared one stays open).

    Raises:
        InvalidArgumentType: if ``judge`` is not a :class:`~gem_core.judge.Judge` or None.
        InvalidArgument: if ``on`` or ``reward`` is not one of its values.
    """

    blocking = True  # a judgement waits on the judge server
    state_excludes = frozenset({"judge", "reference_source"})

    def __init__(
        self,
        env: Env,
        judge: Judge | None,
        rubric: Rubric | dict | str | None = None,
        *,
        on: str = "final",
        reward: str = "replace",
        reference: ReferenceSource = None,
        truncate_on_error: bool = False,
        close_judge: bool = False,
    ):
        super().__init__(env)
        if on not in ("final", "turn"):
            raise InvalidArgument(f"Judged(on={on!r}): expected 'final' (the episode's last answer) or 'turn' (every answer).")
        if reward not in ("replace", "add"):
            raise InvalidArgument(f"Judged(reward={reward!r}): expected 'replace' or 'add'.")
        if judge is not None and not isinstance(judge, Judge):
            raise InvalidArgumentType(f"Judged(judge=...) takes a gem_core.judge.Judge or None, got {type(judge).__name__}.")
        self.judge, self.rubric, self.on, self.reward_mode = judge, Rubric.coerce(rubric), on, reward
        self.reference_source, self.truncate_on_error, self.close_judge = reference, truncate_on_error, close_judge
        self.task = ""
        self.last_observation = ""

    @property
    def max_step_seconds(self) -> float:  # type: ignore[override]
        """The inner env's step plus one whole judgement (the judge's deadline)."""
        inner = self.env.get_wrapper_attr("max_step_seconds")
        return inner + (self.judge.deadline + 5.0 if self.judge is not None else 0.0)

    def on_reset(self, observation: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.task = self.last_observation = observation
        return observation, info

    # -- what to judge ----------------------------------------------------------------------------

    def _wants_judgement(self, result: StepResult) -> bool:
        _, _, terminated, truncated, info = result
        if info.get("format_error") or info.get("episode_over"):
            return False
        return self.on == "turn" or bool(terminated or truncated)

    def _task_text(self) -> str:
        if self.on == "turn" and self.last_observation and self.last_observation != self.task:
            return f"{self.task}\n\n[the environment's latest message]\n{self.last_observation}"
        return self.task

    def _reference(self) -> str | None:
        source = self.reference_source
        if source is None:
            value = getattr(self.env.unwrapped, "judge_reference", None)
        elif isinstance(source, str):
            value = source
        else:
            try:
                value = source(self.env.unwrapped)
            except Exception as exc:  # noqa: BLE001 - a broken reference function is reported, not raised
                log_error_once(self.env.unwrapped, f"judge: the reference function failed: {type(exc).__name__}", str(exc))
                value = None
        return None if value is None else str(value)

    def _apply(self, result: StepResult, verdict: Verdict) -> StepResult:
        observation, env_reward, terminated, truncated, info = result
        info = {**info, "env_reward": float(env_reward), "judge": verdict.to_info()}
        if verdict.error is not None:
            info["error"] = verdict.error
            log_error_once(self.env.unwrapped, verdict.error.split(";")[0][:200])
            if self.truncate_on_error and not terminated:
                truncated = True
        reward = verdict.reward + (float(env_reward) if self.reward_mode == "add" else 0.0)
        self.last_observation = observation
        return observation, reward, terminated, truncated, info

    def _no_judgement(self, result: StepResult) -> StepResult:
        self.last_observation = result[0]
        return result

    # -- stepping ---------------------------------------------------------------------------------

    def step(self, action: str) -> StepResult:
        """Step the env; a step to judge (see ``on``) gets the verdict's reward, in place of or added to the env's
        (``reward``).
        """
        task = self._task_text()
        result = self.env.step(action)
        if not self._wants_judgement(result):
            return self._no_judgement(result)
        if self.judge is None:
            return self._apply(result, Verdict(0.0, error=NO_JUDGE))
        return self._apply(result, self.judge.judge(task, action, rubric=self.rubric, reference=self._reference()))

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` with the env's ``astep`` and the judge's async call."""
        task = self._task_text()
        result = await self.env.astep(action)
        if not self._wants_judgement(result):
            return self._no_judgement(result)
        if self.judge is None:
            return self._apply(result, Verdict(0.0, error=NO_JUDGE))
        return self._apply(result, await self.judge.ajudge(task, action, rubric=self.rubric, reference=self._reference()))

    def close(self) -> None:
        """Close the env, and the judge too when this wrapper owns it (``close_judge``)."""
        super().close()
        if self.close_judge and self.judge is not None:
            self.judge.close()
