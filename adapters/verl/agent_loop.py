"""GEM episodes as a verl agent loop: one env episode per dataset row, token-exact.

verl's ``AgentLoopWorker`` builds one agent loop per sample (``hydra.utils.instantiate`` of the entry
in ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` whose ``name`` matches the row's
``agent_name``) and awaits ``run(sampling_params, **row)``. :class:`GemAgentLoop` answers with one
GEM episode:

- the env id, seed and env kwargs come from the row's ``extra_info`` (written by
  :mod:`gem_adapters.verl.make_dataset`); the env is reset with that seed, so the prompt the policy
  sees is the env's first observation (the dataset's ``prompt`` column holds the same text, for
  verl's length filter and logs);
- :class:`gem_core.rollout.session.EpisodeSession` keeps the books (sampled ids verbatim, env
  tokens as chat-template deltas with mask 0, ``env.astep`` so a slow env never blocks verl's event
  loop); verl's server manager samples each turn (:class:`ServerManagerPolicy`, one request id per
  episode so the prefix cache is reused);
- the response never exceeds ``actor_rollout_ref.rollout.response_length`` (the session's
  ``max_response_tokens``): each turn's ``max_tokens`` is what is left, and an observation that would
  not fit ends the episode as truncated; a first observation longer than ``rollout.prompt_length`` fails
  right after the env's reset, before any request;
- the response verl gets ends on its last sampled token: the closing ids the session appends (mask 0) after a
  turn cut by length are left out, so a reward verl puts on the last response token lands on a token that
  GAE and REINFORCE++ read; ``response_logprobs`` is None when the server returned no log-probs for a turn
  (as verl's ``ToolAgentLoop`` does), never 0.0 standing in for them;
- vision envs (``vision:*``) are refused: the loop sends verl token ids only (no processor, no
  ``multi_modal_data``);
- ``reward_score`` is the episode return, so verl's reward loop is skipped; ``extra_fields`` hold
  ``turn_scores`` (per-turn rewards, verl's own key), ``extras`` (GEM's own: env id, seed, turn spans,
  episode metrics) and ``reward_extra_info`` (see below).

Rows of other agent loops in the same batch (``single_turn_agent``, ``tool_agent``): verl merges
``extra_fields`` into ``non_tensor_batch`` per key, and ``AgentLoopManager`` concatenates its workers'
chunks with ``DataProto.concat``, which needs every chunk to have the same keys. verl keeps a fixed
set of keys (``turn_scores``, ``tool_rewards``, ``min_global_steps``, ``max_global_steps``, ``extras``)
in every chunk for that reason, so GEM puts everything of its own under ``extras``. Under the legacy
worker (``trainer.use_v1=False``) ``reward_extra_info`` must carry the same keys in every row, which
GEM cannot see from here: :mod:`gem_adapters.verl.reward_extra_info` says which keys a GEM row carries
there (``acc``, none without a reward loop, or ``reward_extra_keys`` from the YAML entry) and why;
GEM's metrics then stay in ``extras["metrics"]``. verl's default trainer (``use_v1=True``) merges
``reward_extra_info`` row by row, filling missing keys with None, so there the metrics also go to
``reward_extra_info`` and verl logs them (``val-aux/<data_source>/<key>/mean@N``).

Per-turn credit (``reward_placement: turn``, the default): verl writes ``reward_score`` on the last
response token (``AgentLoopOutput.as_dict`` makes ``rm_scores``). The loop returns a
:class:`GemAgentLoopOutput`, whose ``as_dict`` writes each turn's reward on that turn's last sampled
token instead (a turn that sampled no token: on the last sampled token before it,
:attr:`gem_core.rollout.TokenTrajectory.token_rewards`). verl's default trainer (``trainer.use_v1=True``)
builds ``rm_scores`` from exactly this ``as_dict`` in its worker (``AgentLoopWorkerTQ._agent_loop_postprocess``), and ``rm_scores``
becomes ``token_level_scores`` and ``token_level_rewards`` unchanged, so GAE, and the ``gem_rebn``
estimator of :mod:`gem_adapters.verl.advantage`, see per-turn rewards; GRPO, RLOO and REINFORCE++
sum the row, which is the episode return either way. This is the least invasive route: no
manager or worker subclass, no trainer patch, only the object the loop returns. The legacy trainer
(``trainer.use_v1=False``, deprecated) pads outputs without ``as_dict`` and keeps the return on the
last token.

Asynchronous training (``verl.experimental.one_step_off_policy``, ``verl.experimental.fully_async_policy``):
both build verl's legacy ``AgentLoopManager``/``AgentLoopWorker`` whatever ``trainer.use_v1`` says, so the
loop merges ``reward_extra_info`` the legacy way there (:func:`runs_in_v1_worker`). A weight sync may abort a
turn in flight: under fully_async with ``async_training.partial_rollout=True`` verl's
``FullyAsyncLLMServerClient`` resumes it itself (the turn's tokens span two versions); with a plain client
(``one_step_off_policy``, ``partial_rollout=False``) the aborted turn comes back and
:class:`ServerManagerPolicy` samples it again from the same context. Either way the env is stepped once per
action. ``extra_fields`` carry verl's ``min_global_steps``/``max_global_steps`` (fully_async's batch step
reads them from every trajectory), and ``extras`` the version of each response token (``token_versions``)
and each turn's ``[min, max]`` (``turn_versions``).

Curriculum (``curriculum:`` in a YAML entry, :mod:`gem_core.curriculum`): verl 0.9.1 has no hook for a
sampler of its own over the dataset (``create_rl_sampler`` builds a random or sequential one and
``main_ppo`` passes no other), so the agent loop chooses the episode start instead: one draw per prompt,
keyed by the ``uid`` its ``rollout.n`` copies share (the legacy trainer repeats the row, the v1 worker runs
``n`` sessions of it), and every finished episode updates the sampler. Agent loops run in several
``AgentLoopWorker`` actors, so the sampler is one named Ray actor for the job
(:func:`~gem_core.curriculum.shared_group_starts`). What verl leaves no hook for: the sampler's state is
not in verl's checkpoints (``state_dir`` keeps ``gem_task_sampler.json`` up to date instead, read back when
the job starts again), and a worker cannot add metrics to verl's training log (each episode's task is in
``extras["task"]``; validation scores go by ``data_source``, the env id).
"""

from __future__ import annotations

import asyncio
import math
import numbers
import time
from collections.abc import Mapping
from typing import Any, Literal
from uuid import uuid4

from gem_adapters.framework_version import check_verl_version
from gem_adapters.verl.make_dataset import require_text_env
from gem_adapters.verl.reward_extra_info import RewardExtraInfo, legacy_reward_extra_keys, reward_extra_info
from gem_core.curriculum import shared_group_starts
from gem_core.errors import InvalidArgument
from gem_core.rollout.chat_template import ChatTemplate
from gem_core.rollout.metrics import trajectory_metrics
from gem_core.rollout.options import EpisodeOptions, check_episode_options
from gem_core.rollout.policy import Generation, SamplingParams, default_stop_token_ids
from gem_core.rollout.runner import run_session
from gem_core.rollout.session import EpisodeSession
from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rows.label import EpisodeLabel, LabelError, parse_label

check_verl_version()  # before verl is imported: a wrong install fails with the install line first

import torch  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput  # noqa: E402

__all__ = ["GemAgentLoop", "GemAgentLoopOutput", "ServerManagerPolicy", "runs_in_v1_worker", "RewardPlacement", "RewardExtraInfo", "episode_label", "GEM_EXTRAS_KEY"]

GEM_EXTRAS_KEY = "extras"
"""The ``extra_fields`` key holding GEM's own per-episode data (one of the keys verl keeps in every
chunk, so chunks without GEM rows still concatenate): ``env_id``, ``env_seed``, ``task``, ``turn_spans``,
``metrics``, ``token_versions``, ``turn_versions``, ``resampled_turns``."""

RewardPlacement = Literal["turn", "episode"]
"""Where the per-turn rewards go in ``rm_scores``: ``"turn"`` puts each turn's reward on its last
sampled token; ``"episode"`` leaves verl's default (the return on the last response token)."""

#: The keyword arguments verl's ``AgentLoopWorker`` passes to every agent loop (``AgentLoopBase``'s, and ``tools``),
#: and ``name``, which hydra passes on from the YAML entry: any other key the loop does not name is a mistake.
_VERL_KWARGS = {"trainer_config", "server_manager", "tokenizer", "processor", "dataset_cls", "data_config", "tools", "name"}

_MAKE_DATASET_HINT = "build the dataset with `python -m gem_adapters.verl --env <env id> --n <rows> --out train.parquet`"


class ServerManagerPolicy:
    """verl's server manager as a :class:`gem_core.rollout.policy.Policy` for one episode.

    ``await server_manager.generate(request_id, prompt_ids=..., sampling_params=...)`` returns a
    ``TokenOutput`` (``token_ids``, ``log_probs``, ``stop_reason``, ``extra_fields``). verl's sampling parameters
    (temperature, top-p/k, ``logprobs``, ``stop_token_ids``; greedy during validation) are kept as verl chose
    them; the policy adds only the per-turn ``max_tokens`` and the ``stop_token_ids`` that end a turn (to verl's
    own, as verl's ``ToolAgentLoop`` merges them).

    Asynchronous training (verl's ``fully_async_policy``, ``one_step_off_policy``, v1 ``*_async`` trainers):

    - weight versions: verl's vLLM server reports the version of its weights in
      ``extra_fields["global_steps"]``, and its client ``min_global_steps``/``max_global_steps`` of a
      request. Each sampled token is tagged with its turn's ``min_global_steps`` (``Generation.versions``);
      a turn verl resumed across a weight sync (``FullyAsyncLLMServerClient`` with
      ``async_training.partial_rollout=True``) reports only its first and last version, not where the
      sync fell, so its tokens carry the oldest (a staleness computed from them is never too small), and
      :attr:`turn_versions` keeps both ends.
    - an aborted turn (``stop_reason="aborted"``: a plain client, which ``one_step_off_policy`` uses, or
      ``partial_rollout=False``; also a server that refuses requests while paused) is sampled again from
      the same context after :attr:`abort_backoff_s`, as :class:`gem_core.rollout.policy_version.VersionedPolicy`
      does: the env never sees the fragment, and the turn is what the new weights sampled. Only after
      :attr:`max_consecutive_aborts` aborts in a row does the turn come back aborted (the episode ends truncated).

    Args:
        server_manager: verl's ``LLMServerClient`` (``AgentLoopBase.server_manager``).
        sampling_params: the dict verl passed to ``run``.
        request_id: one id per episode: verl routes it to the same server (prefix cache).
        request_kwargs: extra keyword arguments for every call (e.g. ``priority``).
    """

    abort_backoff_s: float = 1.0
    """Wait before sampling an aborted turn again (verl's own client waits 1 s before it resumes)."""
    max_consecutive_aborts: int = 600
    """Aborts of one turn in a row after which the turn stands aborted (a server that never resumes)."""

    def __init__(self, server_manager: Any, sampling_params: Mapping[str, Any], *, request_id: str | None = None,
                 request_kwargs: Mapping[str, Any] | None = None):
        self.server_manager = server_manager
        self.sampling_params = dict(sampling_params)
        self.request_id = request_id or uuid4().hex
        self.request_kwargs = dict(request_kwargs or {})
        self.num_preempted = 0
        self.generate_seconds = 0.0
        """Time spent waiting for the server: verl's ``generate_sequences`` phase of the episode."""
        self.resampled_turns = 0
        """Aborted generations sampled again."""
        self.turn_versions: list[list[int | None]] = []
        """``[min_global_steps, max_global_steps]`` of each sampled turn, as verl's client reports them."""

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """Sample one turn from verl's server, sampling an aborted turn again (class docstring).

        Args:
            prompt_ids: The episode's context so far (prompt, earlier turns and observations).
            sampling: The turn's limits: ``max_new_tokens`` becomes the request's ``max_tokens``, and
                ``stop_token_ids`` end the turn.

        Returns:
            The sampled ids, their log-probs (None when verl returned none), the finish reason (``"stop"``,
            ``"length"``, or ``"abort"`` after :attr:`max_consecutive_aborts` aborts in a row) and the
            turn's weight version per token.

        Raises:
            InvalidArgument: The server returned log-probs that are not one per sampled token, or a weight
                version (``extra_fields["global_steps"]``, ``min_global_steps``, ``max_global_steps``) that is
                not a whole number.
        """
        started = time.perf_counter()
        params = {**self.sampling_params, "max_tokens": int(sampling.max_new_tokens)}
        # verl's stop ids first (a stop id it set must still stop the turn), then the turn's own, each once.
        stop_ids = list(dict.fromkeys([*(self.sampling_params.get("stop_token_ids") or []), *(sampling.stop_token_ids or [])]))
        if stop_ids:
            params["stop_token_ids"] = stop_ids
        aborts = 0
        while True:
            output = await self.server_manager.generate(
                request_id=self.request_id, prompt_ids=list(prompt_ids), sampling_params=params, **self.request_kwargs
            )
            self.num_preempted += int(output.num_preempted or 0)
            if output.stop_reason not in _ABORTED or aborts >= self.max_consecutive_aborts:
                break
            aborts += 1
            self.resampled_turns += 1
            await asyncio.sleep(self.abort_backoff_s)
        self.generate_seconds += time.perf_counter() - started
        token_ids = [int(t) for t in output.token_ids]
        oldest, newest = _version_span(output)
        self.turn_versions.append([oldest, newest])
        return Generation(  # refuses log-probs that are not one per token
            token_ids=token_ids,
            logprobs=[float(x) for x in output.log_probs] if output.log_probs is not None else None,
            finish_reason=_finish_reason(output.stop_reason, token_ids, stop_ids, sampling.max_new_tokens),
            versions=None if oldest is None else [oldest] * len(token_ids),
        )

    @property
    def version_span(self) -> tuple[int | None, int | None]:
        """The episode's oldest and newest weight version (verl's ``min_global_steps``/``max_global_steps``)."""
        oldest = [v for v, _ in self.turn_versions if v is not None]
        newest = [v for _, v in self.turn_versions if v is not None]
        return (min(oldest) if oldest else None, max(newest) if newest else None)


#: verl's stop reason for a request a weight sync (or a paused server) aborted; vLLM's own word too.
_ABORTED = ("aborted", "abort")


def _whole_number(value: Any) -> int | None:
    """``value`` as an int if it is a whole number (an int, a numpy int, or a float such as 3.0), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(float(value))
    return None


def _version_span(output: Any) -> tuple[int | None, int | None]:
    """``(min_global_steps, max_global_steps)`` of one verl ``TokenOutput`` (None: the server reports none).

    Raises:
        InvalidArgument: A reported version is not a whole number (a version 2.7 would have been taken for 2).
    """
    extra = getattr(output, "extra_fields", None) or {}
    version = extra.get("global_steps")
    span = []
    for key in ("min_global_steps", "max_global_steps"):
        value = extra.get(key, version)
        number = None if value is None else _whole_number(value)
        if value is not None and number is None:
            named = key if key in extra else "global_steps"
            raise InvalidArgument(
                f"verl's rollout server reported the weight version extra_fields[{named!r}]={value!r}; it must be a whole "
                "number (the trainer step whose weights sampled the turn) or absent. verl's own servers report ints: "
                "check the server or LLM client that fills TokenOutput.extra_fields."
            )
        span.append(number)
    return span[0], span[1]


def _row_priority(value: Any) -> int:
    """The vLLM scheduling priority of a dataset row (verl numbers the samples itself when the dataset has no
    ``priority`` column); None is 0.

    Raises:
        InvalidArgument: ``value`` is not a whole number.
    """
    if value is None:
        return 0
    priority = _whole_number(value)
    if priority is None:
        raise InvalidArgument(
            f"The dataset row's priority is {value!r}; verl sends it to vLLM as the request's scheduling priority, a whole "
            "number. Give the priority column whole numbers, or drop it (verl then numbers the samples itself)."
        )
    return priority


def _finish_reason(stop_reason: str | None, token_ids: list[int], stop_ids: list[int], max_tokens: int) -> str:
    """verl reports ``'completed'`` for both a stop token and the length limit; tell them apart."""
    if stop_reason in _ABORTED:
        return "abort"
    if token_ids and token_ids[-1] in stop_ids:
        return "stop"
    return "length" if len(token_ids) >= max_tokens else "stop"


def runs_in_v1_worker(config: Mapping[str, Any]) -> bool:
    """Whether verl runs the agent loops of this config in its v1 worker (``AgentLoopWorkerTQ``).

    ``trainer.use_v1`` says so for ``main_ppo``. verl's experimental asynchronous entry points
    (``verl.experimental.one_step_off_policy.main_ppo``, ``verl.experimental.fully_async_policy.fully_async_main``)
    build the legacy ``AgentLoopManager`` and its ``AgentLoopWorker`` whatever ``trainer.use_v1`` says
    (their configs keep it true); theirs are the configs with a top-level ``rollout`` section (the
    separate rollout resources), fully_async's also with ``async_training``.
    """
    if "async_training" in config or "rollout" in config:
        return False
    return bool((config.get("trainer") or {}).get("use_v1", True))


class GemAgentLoopOutput(AgentLoopOutput):
    """An :class:`AgentLoopOutput` whose ``rm_scores`` hold each turn's reward on its last sampled token.

    Validates exactly like its parent (same fields); the per-token rewards are a private attribute, so
    ``model_dump`` and the pydantic schema are unchanged.
    """

    _token_rewards: list[float] | None = PrivateAttr(default=None)

    def with_token_rewards(self, token_rewards: list[float]) -> GemAgentLoopOutput:
        """Set the per-token rewards :meth:`as_dict` writes into ``rm_scores``.

        Args:
            token_rewards: One reward per response id (each turn's reward on its last sampled token, 0 elsewhere).

        Returns:
            This output, for chaining.

        Raises:
            InvalidArgument: ``token_rewards`` is not one per response id.
        """
        if len(token_rewards) != len(self.response_ids):
            raise InvalidArgument(
                f"Got {len(token_rewards)} token rewards for {len(self.response_ids)} response ids; need one per id."
            )
        self._token_rewards = [float(r) for r in token_rewards]
        return self

    def as_dict(self) -> dict[str, Any]:
        """verl's dict of this output, with ``rm_scores`` the per-token rewards where they were set.

        Returns:
            ``AgentLoopOutput.as_dict()``'s dict; its ``rm_scores`` (present when verl scores in the worker)
            replaced by a float32 tensor of :meth:`with_token_rewards`'s values, if given.
        """
        output = super().as_dict()
        if self._token_rewards is not None and "rm_scores" in output:
            output["rm_scores"] = torch.tensor(self._token_rewards, dtype=torch.float32)
        return output


def episode_label(row: Mapping[str, Any]) -> EpisodeLabel:
    """The episode a dataset row names in its ``extra_info`` (as parquet hands it back).

    Raises:
        gem_core.rows.label.LabelError: the row has no ``extra_info``, or it lacks ``env_id`` or
            ``seed``, or names an unknown env (naming the closest ids).
    """
    extra_info = row.get("extra_info")
    if extra_info is not None and hasattr(extra_info, "item") and not isinstance(extra_info, Mapping):
        extra_info = extra_info.item()  # a 0-d numpy object array
    fix_hint = f"The episode comes from the row's extra_info['env_id'/'seed']: {_MAKE_DATASET_HINT}."
    if not isinstance(extra_info, Mapping):
        raise LabelError(f"The dataset row has no extra_info dict (got {type(extra_info).__name__}). {fix_hint}")
    fields = dict(extra_info)
    if isinstance(fields.get("seed"), float) and fields["seed"].is_integer():
        fields["seed"] = int(fields["seed"])  # parquet may hand integers back as floats
    return parse_label(fields, fix_hint=fix_hint, other_keys=True)  # extra_info is also verl's and the user's


class GemAgentLoop(AgentLoopBase):
    """A verl agent loop that plays one GEM env episode per sample.

    Enable it with an agent loop config (``python -m gem_adapters.verl.config > gem_agent_loop.yaml``) and a dataset whose
    ``agent_name`` column names it. Keys of that YAML entry besides ``name`` and ``_target_`` arrive
    here as keyword arguments:

    Args:
        max_turns: truncate an episode after this many turns (None: the env decides).
        system_prompt: a system message before the first observation (None: the template's default).
        max_new_tokens: most tokens sampled per turn (None: whatever the response budget leaves).
        reward_placement: ``"turn"`` (each turn's reward on its last sampled token in ``rm_scores``) or
            ``"episode"`` (verl's default: the episode return on the last token).
        curriculum: a task sampler spec (:func:`gem_core.curriculum.shared_group_starts`: ``tasks``, TaskSampler's
            arguments, ``state_dir``): the episodes start where the sampler draws instead of at the row's
            label, one draw per prompt shared by its ``rollout.n`` copies (same ``uid``), and every finished
            episode updates it. One sampler serves the whole job (a named Ray actor). Give it to the entry
            that the *training* rows name, so validation rows keep their own episodes.
        reward_extra_keys: with verl's legacy trainer (``trainer.use_v1=False``) only, the ``reward_extra_info``
            keys of every row in a batch that mixes GEM rows with another agent loop's (e.g. the keys of the
            dict its reward function returns); None: ``acc``, or none when the workers have no reward loop
            (:mod:`gem_adapters.verl.reward_extra_info`).
        hf_model_type: verl's model type for its own token builders; ignored (GEM's chat template makes the
            token deltas, so verl gets the generic builder).

    The remaining arguments are those verl's ``AgentLoopWorker`` passes (see ``AgentLoopBase``).

    Raises:
        InvalidArgument: (a ValueError) a key of the YAML entry the loop does not take (verl's base class would
            drop it, and the loop run with the default), a bad ``max_turns``, ``system_prompt`` or ``max_new_tokens``
            (:func:`gem_core.rollout.options.check_episode_options`), a ``reward_placement`` other than
            ``"turn"``/``"episode"``, or a ``data.apply_chat_template_kwargs`` that is not a dict with str keys,
            named when verl builds the loop.
    """

    def __init__(
        self,
        *args: Any,
        max_turns: int | None = None,
        system_prompt: str | None = None,
        max_new_tokens: int | None = None,
        reward_placement: RewardPlacement = "turn",
        curriculum: Mapping[str, Any] | None = None,
        reward_extra_keys: list[str] | None = None,
        hf_model_type: str | None = None,
        **kwargs: Any,
    ):
        # verl picks a token builder by model type for its own ct_* helpers. GEM computes token deltas with
        # gem_core's ChatTemplate and never calls that builder, so it asks for the generic one: a family's
        # builder may reject a tokenizer GEM handles (verl's Qwen builder wants "\n" to be one token).
        unknown = sorted(set(kwargs) - _VERL_KWARGS)  # AgentLoopBase drops unknown keys, so a typo would run with the default
        if unknown:
            raise InvalidArgument(f"GemAgentLoop: unknown key(s) {', '.join(unknown)} in its agent loop YAML entry; it takes name, _target_, max_turns, "
                             "system_prompt, max_new_tokens, reward_placement, curriculum and reward_extra_keys (env kwargs go in the dataset: make_dataset's --env-kwargs).")
        check_episode_options("GemAgentLoop", max_turns=max_turns, system_prompt=system_prompt, max_new_tokens=max_new_tokens)
        super().__init__(*args, hf_model_type=None, **kwargs)
        if reward_placement not in ("turn", "episode"):
            raise InvalidArgument(f"reward_placement must be 'turn' or 'episode', got {reward_placement!r}.")
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        # Which worker merges the batch: v1 (verl's default) merges reward_extra_info row by row; the legacy one by the first row's keys.
        self.use_v1 = runs_in_v1_worker(self.config)
        self.reward_extra_keys = legacy_reward_extra_keys(self.config, reward_extra_keys, use_v1=self.use_v1)
        self.reward_placement: RewardPlacement = reward_placement
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.max_new_tokens = int(max_new_tokens or self.response_length)
        self.chat_template = ChatTemplate.for_tokenizer(
            self.tokenizer,
            system_prompt=system_prompt,
            chat_template_kwargs=_template_kwargs(self.apply_chat_template_kwargs),
        )
        # Sent to the server with every turn, so a turn ends at end-of-turn even where the model's own
        # generation config stops only at its eos token.
        self.stop_token_ids = default_stop_token_ids(self.tokenizer, self.chat_template)
        # Where episodes start: the row's label, or (curriculum) one sampler's draw per prompt, shared by its copies.
        self.task_starts = shared_group_starts(curriculum, int(self.rollout_config.n))

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        """Play the episode a dataset row names; verl's ``AgentLoopWorker`` awaits this once per sample.

        Args:
            sampling_params: verl's sampling settings for the batch (temperature, top-p, ``logprobs``, ...),
                sent with every turn.
            **row: The dataset row: ``extra_info`` names the episode (env id, seed, env kwargs), ``uid`` groups
                a prompt's ``rollout.n`` copies (one curriculum draw each group), ``priority`` goes to vLLM.

        Returns:
            The episode as verl's output: prompt and response ids, the response's loss mask (env tokens 0),
            ``reward_score`` the episode return, ``extra_fields`` with ``turn_scores``, GEM's ``extras`` and
            ``reward_extra_info`` (module docstring). With ``reward_placement="turn"`` a
            :class:`GemAgentLoopOutput` that puts each turn's reward on its last sampled token.

        Raises:
            LabelError: The row's ``extra_info`` does not name an episode (no ``env_id`` or ``seed``, or an
                unknown env).
            InvalidArgument: The env's first observation is longer than ``rollout.prompt_length`` tokens (the
                message says which setting to raise; raised right after the env's reset, before any request),
                the env is a vision env (``vision:*``: verl's adapter passes no images), or the row's
                ``priority`` is not a whole number.
        """
        # As verl's ToolAgentLoop does: only vLLM's server takes a scheduling priority.
        priority = _row_priority(row.get("priority"))
        # verl gives the rollout.n copies of a prompt one uid (a row without one is its own group).
        label = await self.task_starts.start(str(row.get("uid") or uuid4().hex), episode_label(row))
        require_text_env(label.env_id)  # a curriculum may draw one too
        use_priority = priority != 0 and self.rollout_config.name == "vllm"
        policy = ServerManagerPolicy(
            self.server_manager, sampling_params, request_kwargs={"priority": priority} if use_priority else None
        )
        # Each turn samples at most what is left of response_length; an observation that would not fit
        # ends the episode (truncated).
        session = _VerlEpisodeSession.from_label(
            label, self.tokenizer, chat_template=self.chat_template,
            options=EpisodeOptions(max_turns=self.max_turns, max_response_tokens=self.response_length),
            prompt_length=self.prompt_length,
        )
        started = time.perf_counter()
        try:
            trajectory = await run_session(
                session, policy, sampling=SamplingParams(max_new_tokens=self.max_new_tokens, stop_token_ids=self.stop_token_ids)
            )
        finally:
            await session.aclose()
        await self.task_starts.finish(label, trajectory)  # tags its task (and updates the sampler)
        metrics = AgentLoopMetrics(  # the env's share of the time is what the server did not take
            generate_sequences=policy.generate_seconds, num_preempted=policy.num_preempted,
            tool_calls=time.perf_counter() - started - policy.generate_seconds,
        )
        return self._output(trajectory, metrics, want_logprobs=bool(sampling_params.get("logprobs")), policy=policy)

    def _output(self, trajectory: TokenTrajectory, timing: AgentLoopMetrics, *, want_logprobs: bool,
                policy: ServerManagerPolicy) -> AgentLoopOutput:
        # The session's max_response_tokens keeps the response within response_length.
        metrics = trajectory_metrics([trajectory], prefix="gem_")
        # The response verl gets ends on its last sampled token. What follows it (the closing ids the session appends
        # with mask 0 after a turn cut by length) trains nothing and no later turn reads it, and verl puts a reward on
        # the last response token (reward_placement: episode; the legacy worker always): on a mask-0 token GAE and
        # REINFORCE++ would drop it. The per-turn rewards already sit on sampled tokens (TokenTrajectory.token_rewards).
        end = _sampled_end(trajectory.loss_mask)
        all_token_rewards = trajectory.token_rewards
        token_rewards = all_token_rewards[:end]
        if token_rewards:
            token_rewards[-1] += sum(all_token_rewards[end:])  # nothing, unless a turn's span ends on a mask-0 token
        # None when a turn came back without log-probs (verl's ToolAgentLoop does the same): 0.0 would read as
        # probability 1 in verl's rollout_log_probs.
        with_logprobs = want_logprobs and bool(trajectory.metrics.get("has_logprobs", True))
        # Only keys of verl's fixed set, so a batch mixing GEM rows with other agent loops merges (module docstring).
        extra_fields = {
            "turn_scores": [float(r) for r in trajectory.rewards],
            GEM_EXTRAS_KEY: {
                "env_id": trajectory.env_id,
                "env_seed": trajectory.seed,
                "task": trajectory.metrics["task"],  # env id and level kwargs (gem_core.curriculum.task_name)
                "turn_spans": [[min(int(s), end), min(int(e), end)] for s, e in trajectory.turn_spans],
                "metrics": metrics,
                # Which weights sampled what (module docstring, asynchronous training): per response token (-1 on env
                # tokens), per turn [min, max] as verl reports it, and how many aborted turns were sampled again.
                "token_versions": list(trajectory.token_versions[:end]) or [-1] * end,
                "turn_versions": policy.turn_versions,
                "resampled_turns": policy.resampled_turns,
            },
            # verl's own keys (its ToolAgentLoop sets them): fully_async's batch step reads both from every
            # trajectory (its partial-rollout and staleness metrics), the v1 worker stores them with the sample.
            "min_global_steps": policy.version_span[0],
            "max_global_steps": policy.version_span[1],
            # verl logs numbers under reward_extra_info as val-aux/<data_source>/<key>/mean@N (and dumps them).
            "reward_extra_info": reward_extra_info(
                metrics, trajectory.episode_return, use_v1=self.use_v1, legacy_keys=self.reward_extra_keys
            ),
        }
        output_cls = GemAgentLoopOutput if self.reward_placement == "turn" else AgentLoopOutput
        output = output_cls(
            prompt_ids=list(trajectory.prompt_ids),
            response_ids=list(trajectory.response_ids[:end]),
            response_mask=list(trajectory.loss_mask[:end]),
            response_logprobs=list(trajectory.logprobs[:end]) if with_logprobs else None,
            reward_score=trajectory.episode_return,
            # verl counts chat messages (user and assistant): the first observation, each action, each later observation.
            num_turns=len(trajectory.observations) + trajectory.num_turns,
            metrics=timing,
            extra_fields=extra_fields,
        )
        if isinstance(output, GemAgentLoopOutput):
            output.with_token_rewards(token_rewards)
        return output


def _sampled_end(loss_mask: list[int]) -> int:
    """One past the last sampled token of a response (the whole response when it has no sampled token: then
    nothing trains, and verl's return on the last token still reaches GRPO's group statistics)."""
    for index in range(len(loss_mask) - 1, -1, -1):
        if loss_mask[index]:
            return index + 1
    return len(loss_mask)


def _template_kwargs(value: Any) -> dict[str, Any]:
    """verl's ``data.apply_chat_template_kwargs`` as the template variables of GEM's chat template.

    Raises:
        InvalidArgument: ``value`` is not a mapping with str keys.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidArgument(
            f"data.apply_chat_template_kwargs={value!r} must be a dict of template variables with str keys, e.g. "
            "+data.apply_chat_template_kwargs.enable_thinking=false (GEM renders every turn's chat template with them)."
        )
    return dict(value)


class _VerlEpisodeSession(EpisodeSession):
    """The session of one verl sample: it refuses a first observation longer than verl's ``rollout.prompt_length``
    right after the env's reset, before any request reaches verl's servers and before any env step.

    Args:
        prompt_length: verl's ``actor_rollout_ref.rollout.prompt_length``.
        *args, **kwargs: :class:`EpisodeSession`'s.
    """

    def __init__(self, *args: Any, prompt_length: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prompt_length = prompt_length

    async def start(self, seed: int | None = None, options: dict | None = None) -> list[int]:
        """:meth:`EpisodeSession.start`, then the prompt-length check.

        Raises:
            InvalidArgument: The prompt (system prompt, first observation, generation prompt) is longer than
                :attr:`prompt_length` tokens.
        """
        prompt_ids = await super().start(seed, options)
        if len(prompt_ids) > self.prompt_length:
            label = self.label
            where = f"{self.env_id!r}" + (f" (seed {label.seed})" if label is not None else "")
            raise InvalidArgument(
                f"The first observation of {where} is {len(prompt_ids)} tokens with the chat template, more than "
                f"actor_rollout_ref.rollout.prompt_length={self.prompt_length}; raise data.max_prompt_length "
                "(rollout.prompt_length follows it) or shorten the system prompt."
            )
        return prompt_ids
