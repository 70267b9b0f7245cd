"""Evaluate a token-level :class:`~gem_core.rollout.policy.Policy` (a local transformers model by default).

Episodes run through the core's own episode loop (:func:`gem_core.rollout.run_episode`), so what is
evaluated is exactly what training would sample: token in, token out, the tokenizer's chat template,
no re-tokenization of history.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gem_core.env import Env, episode_success
from gem_core.errors import InvalidArgument
from gem_core.eval.report import EpisodeRecord, step_error
from gem_core.protocols import Tokenizer

if TYPE_CHECKING:
    from gem_core.eval.config import EvalConfig

__all__ = ["PolicyBackend", "check_model_name", "record_from_trajectory"]


class PolicyBackend:
    """Runs episodes with any ``Policy`` and the tokenizer whose chat template it was trained with.

    Training scripts pass the policy they hold in memory; :meth:`from_pretrained` loads a
    ``transformers`` model from a local path or a hub id (CPU works).

    Args:
        policy: a :class:`~gem_core.rollout.Policy` (``generate(prompt_ids, sampling)``).
        tokenizer: the tokenizer whose chat template renders the conversation.
        model_name: the name recorded in the report.
    """

    kind = "transformers"

    def __init__(self, policy: Any, tokenizer: Tokenizer, *, model_name: str = "policy"):
        self.policy = policy
        self.tokenizer = tokenizer
        self.model_name = model_name
        #: Recorded in the report.
        self.settings = {"policy": type(policy).__name__, "device": str(getattr(policy, "device", None))}

    @classmethod
    def from_pretrained(cls, model: str, *, device: str | None = None, trust_remote_code: bool = False) -> PolicyBackend:
        """Load ``model`` (path or hub id) with ``AutoModelForCausalLM`` and ``AutoTokenizer``.

        Raises:
            InvalidArgument: if the tokenizer has no chat template.
        """
        check_model_name(model)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from gem_core.rollout import TransformersPolicy

        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        if tokenizer.chat_template is None:
            raise InvalidArgument(
                f"The tokenizer of {model!r} has no chat template, so multi-turn episodes cannot be formatted; "
                "evaluate an instruct/chat model, or set tokenizer.chat_template and save it next to the model."
            )
        lm = AutoModelForCausalLM.from_pretrained(model, trust_remote_code=trust_remote_code)
        lm.eval()
        return cls(TransformersPolicy(lm, tokenizer, device=device), tokenizer, model_name=model)

    async def run_episode(self, env: Env, env_id: str, seed: int, config: EvalConfig, record: EpisodeRecord) -> None:
        """Play one episode and fill ``record`` with it."""
        from gem_core.rollout import SamplingParams, run_episode

        sampling = SamplingParams(
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
        )
        trajectory = await run_episode(
            env,
            self.policy,
            self.tokenizer,
            seed=seed,
            sampling=sampling,
            system_prompt=config.system_prompt,
            env_id=env_id,
        )
        record_from_trajectory(trajectory, record, system_prompt=config.system_prompt)

    async def aclose(self) -> None:
        """Nothing to release: the model belongs to the caller."""


def check_model_name(model: str) -> None:
    """Raise ValueError when ``model`` is written as a local path (``/...``, ``./...``, ``~/...``, more than one
    ``/``) that does not exist: transformers would report it as a malformed hub id instead.

    Raises:
        InvalidArgument: if ``model`` looks like a local path that does not exist.
    """
    path = Path(model).expanduser()
    written_as_path = model.startswith(("/", "./", "../", "~", ".\\")) or model.count("/") > 1 or model in (".", "..")
    if written_as_path and not path.exists():
        raise InvalidArgument(f"--model {model}: {path} does not exist (a local model folder, or a hub id such as Qwen/Qwen3-0.6B).")


def record_from_trajectory(trajectory: Any, record: EpisodeRecord, *, system_prompt: str | None = None) -> EpisodeRecord:
    """Fill ``record`` from a :class:`~gem_core.rollout.trajectory.TokenTrajectory`."""
    record.rewards = [float(r) for r in trajectory.rewards]
    record.terminated = bool(trajectory.terminated)
    record.truncated = bool(trajectory.truncated)
    infos = list(trajectory.infos)
    record.format_errors = sum(bool(info.get("format_error")) for info in infos)
    record.success = episode_success(infos, record.episode_return, record.terminated)
    prompt_length = len(trajectory.prompt_ids)
    spans = list(trajectory.turn_spans)
    # Each model call saw the prompt plus every response token before its turn.
    record.prompt_tokens = sum(prompt_length + start for start, _ in spans)
    record.completion_tokens = sum(end - start for start, end in spans)
    transcript = [{"role": "system", "content": system_prompt}] if system_prompt else []
    observations, actions = list(trajectory.observations), list(trajectory.actions)
    for i, observation in enumerate(observations):
        transcript.append({"role": "user", "content": observation})
        if i < len(actions):
            transcript.append({"role": "assistant", "content": actions[i]})
    for action in actions[len(observations) :]:
        transcript.append({"role": "assistant", "content": action})
    final_observation = getattr(trajectory, "final_observation", None)
    if final_observation is not None:
        # The env's answer to the last action: the policy never sees it, the reader of a transcript does.
        transcript.append({"role": "user", "content": final_observation})
    record.transcript = transcript
    error = step_error(infos)  # env.step raised, or a judge gave no verdict
    if error:
        record.error = error
    return record
