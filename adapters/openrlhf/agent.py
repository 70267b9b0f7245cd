"""GEM episodes behind OpenRLHF's multi-turn agent hook (``--train.agent_func_path``).

OpenRLHF 0.11 runs the loop itself (``MultiTurnAgentExecutor.execute``): it generates with vLLM,
hands the agent the action *text*, and appends the agent's feedback *text* after re-tokenizing it.
This module keeps the episode in the core's :class:`~gem_core.rollout.EpisodeSession` instead:

- :class:`GemAgentExecutor` wraps the engine so the session receives the exact sampled token ids and
  logprobs (no decode/re-encode of actions), and hands each per-sample instance the tokenizer and
  length budget through a context variable (OpenRLHF builds instances with no arguments);
- :class:`GemAgentInstance` resets the env named by the row's label and turns each session step into
  OpenRLHF's step dict: the env tokens decoded as ``environment_feedback``, the reward as a tensor;
- OpenRLHF encodes that text again with the tokenizer the executor hands it, which returns the session's own
  ids for exactly the text the episode just produced: env text that spells a special token
  (``<|im_start|>assistant``) stays the plain text the session encoded instead of becoming a turn marker.

OpenRLHF sums the per-turn rewards into one scalar on the last action token. ``reward_gamma < 1``
emits ``gamma**t * r_t`` at turn ``t`` so that sum is the discounted return.

Curriculum (``AgentConfig.curriculum``, :mod:`gem_core.curriculum`): OpenRLHF has no sampler hook of its
own (its prompt dataloader is fixed), but each vLLM engine runs the ``n_samples_per_prompt`` copies of a
prompt as concurrent ``execute`` calls with the row's label, so the agent chooses the start: the first
copy of a label draws, the other copies share the draw, and every finished episode updates the sampler;
one sampler serves every engine (a named Ray actor, :func:`~gem_core.curriculum.shared_group_starts`).
The copies also share one ``sampling_params`` object: the executor counts them by it and warns
(:class:`CopyCountWarning`, naming both settings) when their number is not the agent file's
``n_samples_per_prompt``, and gives each copy params of its own (OpenRLHF writes each copy's remaining
token budget into them, and reads them to cut the first observation).
What OpenRLHF leaves no hook for: the agent cannot tell evaluation rows (``--eval.dataset``) from training
rows, so with a curriculum those are drawn too (evaluate with ``gem eval`` on saved checkpoints); the
sampler's state is not in OpenRLHF's checkpoints (``state_dir`` keeps ``gem_task_sampler.json`` up to date
and is read back when the run starts again); and ``extra_logs`` are averaged key by key over a batch whose
samples must all have the same keys, so the agent logs each task's next-draw probability
(``gem/curriculum/<task>/probability``), not per-task success.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import SpecifierSet

from gem_adapters.framework_version import FrameworkVersionError, SupportedVersions
from gem_core.curriculum import TaskError, sampler_from_spec, sampler_spec, shared_group_starts
from gem_core.errors import InvalidArgument, ResetNeeded, UsageError
from gem_core.protocols import Tokenizer
from gem_core.rollout import ChatTemplate, EpisodeSession, Generation
from gem_core.rollout.options import EpisodeOptions, check_episode_options, episode_options
from gem_core.rollout.vllm_output import generation_from_vllm
from gem_core.rows.label import EpisodeLabel, parse_label

DATASET_HINT = (
    "Build the dataset with `python -m gem_adapters.openrlhf --env ENV_ID --n N --out train.jsonl` "
    "and pass `--data.label_key label`."
)

# apply_chat_template's own arguments, which the chat template sets: as template variables they raise a TypeError
# (multiple values) or change what it returns.
_RESERVED_TEMPLATE_KWARGS = ("conversation", "tokenize", "add_generation_prompt", "continue_final_message", "return_dict", "tools")

_EXECUTE_PARAMS = ["self", "prompt", "label", "sampling_params", "max_length", "hf_tokenizer", "llm_engine"]


class OpenRLHFVersionError(FrameworkVersionError):
    """The installed OpenRLHF does not have the agent hook this adapter implements."""


SUPPORTED_OPENRLHF = SupportedVersions(
    "openrlhf", SpecifierSet("~=0.11.0"), OpenRLHFVersionError, adapter="gem_adapters.openrlhf",
    feature="the class-based agent hook", extra="openrlhf", pin="openrlhf==0.11.2",
    # Not in the extra: OpenRLHF requires flash-attn, an sdist whose build imports torch (and needs CUDA).
    then='pip install --no-deps "openrlhf==0.11.2"',
)
_INSTALL_HINT = SUPPORTED_OPENRLHF.install_hint


def check_openrlhf_version() -> str:
    """Fail at start-up (when OpenRLHF loads the agent file) if the agent hook is not the 0.11 one.

    Checks the version and the hook itself: 0.8.0-0.8.6 had a function API, and a future release
    may change ``execute``'s signature, which would otherwise fail only mid-rollout.

    Returns:
        The installed OpenRLHF version.

    Raises:
        OpenRLHFVersionError: OpenRLHF is missing, not 0.11, or its ``MultiTurnAgentExecutor.execute`` takes other
            parameters; the message gives the install line.
    """
    version = SUPPORTED_OPENRLHF.check()
    try:
        from openrlhf.utils.agent import MultiTurnAgentExecutor
    except ImportError as err:
        raise OpenRLHFVersionError(f"openrlhf.utils.agent has no class-based agent hook ({err}). {_INSTALL_HINT}") from None
    params = list(inspect.signature(MultiTurnAgentExecutor.execute).parameters)
    if params[: len(_EXECUTE_PARAMS)] != _EXECUTE_PARAMS:
        raise OpenRLHFVersionError(
            f"OpenRLHF {version} changed MultiTurnAgentExecutor.execute to {params}; this adapter expects {_EXECUTE_PARAMS}. {_INSTALL_HINT}"
        )
    return version


check_openrlhf_version()

import torch  # noqa: E402  (after the version check, so a wrong install fails with the hint first)
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor  # noqa: E402

__all__ = ["AgentConfig", "CopyCountWarning", "GemAgentExecutor", "GemAgentInstance", "OpenRLHFVersionError", "check_openrlhf_version"]


class CopyCountWarning(UserWarning):
    """OpenRLHF ran a prompt's copies in a number other than ``AgentConfig.n_samples_per_prompt`` (with a curriculum)."""


@dataclass
class AgentConfig:
    """What an agent file sets; OpenRLHF's own flags (lengths, temperature, estimator) stay in the CLI.

    Raises:
        InvalidArgument: An option is out of range (e.g. ``max_new_tokens=0``, ``reward_gamma`` outside [0, 1]), or
            ``chat_template_kwargs`` is not a dict or sets an argument of ``apply_chat_template`` itself
            (``add_generation_prompt``), when the agent file is loaded rather than inside OpenRLHF's workers.
        TaskError: ``curriculum`` is not a task sampler spec (no ``tasks``, an unknown key, an unknown env).
    """

    system_prompt: str | None = None
    """System message put before the first observation (None: the chat template's default)."""
    max_turns: int | None = None
    """End episodes after this many turns (None: the env's own limit)."""
    max_new_tokens: int | None = None
    """Cap on one turn's tokens (``--rollout.max_new_tokens`` caps each turn too; the lower wins). OpenRLHF sets
    ``max_tokens`` to the whole remaining budget every turn."""
    reward_gamma: float = 1.0
    """Discount of the per-turn rewards OpenRLHF sums: 1.0 gives the episode return, below 1 the discounted return."""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments for the tokenizer's chat template (e.g. ``{"enable_thinking": False}``)."""
    curriculum: dict[str, Any] | None = None
    """A task sampler spec (:func:`gem_core.curriculum.shared_group_starts`: ``tasks``, TaskSampler's arguments,
    ``state_dir``): episodes start where it draws, one draw per prompt for its copies. None: at the row's label."""
    n_samples_per_prompt: int = 1
    """Copies per prompt, as ``--rollout.n_samples_per_prompt`` (and ``--eval.n_samples_per_prompt``): with ``curriculum``
    that many copies of a label share a draw; OpenRLHF running another number is warned (:class:`CopyCountWarning`)."""

    def __post_init__(self) -> None:
        # Here, not at the first episode inside OpenRLHF's workers (where max_new_tokens=0 played 1-token turns).
        check_episode_options("AgentConfig", system_prompt=self.system_prompt, max_turns=self.max_turns, max_new_tokens=self.max_new_tokens,
                              reward_gamma=self.reward_gamma, n_samples_per_prompt=self.n_samples_per_prompt)
        episode_options(None, "AgentConfig", chat_template_kwargs=self.chat_template_kwargs)  # the core's rule: a dict, str keys
        reserved = sorted(set(self.chat_template_kwargs or {}) & set(_RESERVED_TEMPLATE_KWARGS))
        if reserved:
            raise InvalidArgument(
                f"AgentConfig: chat_template_kwargs key {reserved[0]!r} is an argument of apply_chat_template that GEM's chat "
                "template sets itself; remove it (chat_template_kwargs holds the template's own variables, e.g. enable_thinking)."
            )
        if self.curriculum:  # read as the first episode reads it (state_dir is the sampler's folder, not its argument)
            try:
                spec = sampler_spec(self.curriculum)
                spec.pop("state_dir", None)
                sampler_from_spec(spec)
            except TaskError as error:
                raise TaskError(f"AgentConfig: curriculum: {error}") from None


@dataclass
class _Episode:
    """What one ``execute`` call shares with the instance OpenRLHF builds inside it."""

    config: AgentConfig
    tokenizer: Tokenizer
    max_length: int
    session: EpisodeSession | None = None
    last_generation: Generation | None = None
    starts: Any = None
    """Where the episode starts (:func:`gem_core.curriculum.shared_group_starts`) and is reported when it ends."""
    start: EpisodeLabel | None = None
    turn_cap: int | None = None
    """The caller's ``max_tokens`` (``--rollout.max_new_tokens``): a cap on each turn."""
    handed: tuple[str, list[int]] | None = None
    """The text the instance last handed OpenRLHF (first observation or feedback) and the session's ids for it."""


@dataclass
class _Copies:
    """The copies of one prompt that :class:`GemAgentExecutor` has seen (they share ``params``)."""

    params: Any
    arrived: int = 0
    running: int = 0
    checked: bool = False


_CURRENT_EPISODE: contextvars.ContextVar[_Episode] = contextvars.ContextVar("gem_openrlhf_episode")


class _RecordingEngine:
    """Forwards ``generate`` to OpenRLHF's engine, keeping the sampled ids and logprobs for the session."""

    def __init__(self, engine: Any, episode: _Episode):
        self._engine, self._episode = engine, episode

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, **kwargs: Any) -> Any:
        # OpenRLHF passes a deep copy, so changing it affects this call only.
        budget = sampling_params.max_tokens or self._episode.max_length
        for cap in (self._episode.config.max_new_tokens, self._episode.turn_cap):
            if cap is not None:
                budget = min(budget, cap)
        if self._episode.session is not None:  # room for a closing end-of-turn, as the core's runner leaves
            budget = self._episode.session.generation_budget(budget)
        sampling_params.max_tokens = max(budget, 1)  # 0 only for a session ended at reset: execute drops that token
        output = await self._engine.generate(prompt_token_ids, sampling_params, **kwargs)
        self._episode.last_generation = generation_from_vllm(output)
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class _SessionTokenizer:
    """The tokenizer OpenRLHF's ``execute`` gets: the session's own ids for the text the episode just handed it.

    OpenRLHF encodes the first observation and each feedback text again (``add_special_tokens=False``), which turns
    env text that spells a special token into that token; the session encoded it as plain text. Other calls, and text
    the episode did not just produce (an instance subclass that rewrote it), go to the real tokenizer.
    """

    def __init__(self, tokenizer: Any, episode: _Episode):
        self._tokenizer, self._episode = tokenizer, episode

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        handed, self._episode.handed = self._episode.handed, None
        # OpenRLHF's one form: hf_tokenizer(text=..., add_special_tokens=False, return_tensors="pt")["input_ids"][0]
        if (handed is not None and not args and kwargs.get("text") == handed[0] and kwargs.get("return_tensors") == "pt"
                and kwargs.get("add_special_tokens") is False and set(kwargs) == {"text", "add_special_tokens", "return_tensors"}):
            return {"input_ids": torch.tensor([handed[1]], dtype=torch.long)}
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


class GemAgentInstance(AgentInstanceBase):
    """One GEM episode, built by OpenRLHF (no arguments) inside :meth:`GemAgentExecutor.execute`.

    Raises:
        UsageError: Built outside :meth:`GemAgentExecutor.execute` (the agent file's executor is not a
            ``GemAgentExecutor``); the message shows the class to define.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        try:
            self._episode = _CURRENT_EPISODE.get()
        except LookupError:
            raise UsageError(
                "GemAgentInstance must be run by GemAgentExecutor: in the agent file, define "
                "`class AgentExecutor(GemAgentExecutor)` (`python -m gem_adapters.files openrlhf-agent` prints one)."
            ) from None
        self.session: EpisodeSession | None = None

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        """Reset the env the prompt's label names (a curriculum may draw another start); OpenRLHF calls this first.

        Args:
            states: OpenRLHF's ``{"observation": prompt, "label": label}``; the label is the dataset's GEM label.

        Returns:
            ``observation``: the env's first observation rendered with the chat template (replacing the dataset's
            prompt text), and the ``label`` unchanged.

        Raises:
            LabelError: The label is not JSON, lacks ``env_id`` or ``seed``, or names an unknown env.
        """
        episode = self._episode
        config, tokenizer = episode.config, episode.tokenizer
        template = ChatTemplate.for_tokenizer(tokenizer, system_prompt=config.system_prompt, chat_template_kwargs=config.chat_template_kwargs)
        # The copies of a prompt run with its label: with a curriculum, the first one's draw is theirs too.
        episode.starts = shared_group_starts(config.curriculum, config.n_samples_per_prompt)
        episode.start = await episode.starts.start(states["label"], parse_label(states["label"], fix_hint=DATASET_HINT))
        self.session = EpisodeSession.from_label(
            episode.start, tokenizer, chat_template=template,
            options=EpisodeOptions(max_turns=config.max_turns, max_total_tokens=episode.max_length),
        )
        episode.session = self.session
        prompt_ids = await self.session.start()
        text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
        episode.handed = (text, prompt_ids)  # OpenRLHF encodes the text next: it gets these ids (_SessionTokenizer)
        return {"observation": text, "label": states["label"]}

    async def step(self, state_dict: dict, **kwargs: Any) -> dict:
        """Step the env with the turn the engine just sampled (its ids as sampled, not re-tokenized text).

        Args:
            state_dict: OpenRLHF's state of the turn; unused, the action's ids come from the recording engine.

        Returns:
            OpenRLHF's step dict: ``rewards`` (the turn's reward times ``reward_gamma`` to the turn index, a tensor),
            ``scores`` (the episode return so far), ``environment_feedback`` (the text appended after the action:
            the observation, with a closing end-of-turn for a cut turn), ``done`` and ``extra_logs`` (``gem/*``
            episode metrics).

        Raises:
            ResetNeeded: Called before :meth:`reset` or before a generation, i.e. not run by :class:`GemAgentExecutor`.
        """
        generation = self._episode.last_generation
        if self.session is None or generation is None:
            raise ResetNeeded("step() before reset() or before a generation: GemAgentInstance needs GemAgentExecutor.")
        if self.session.done:  # the prompt alone filled max_length: OpenRLHF cut it and sampled anyway
            return {"rewards": torch.tensor(0.0), "scores": 0.0, "environment_feedback": "", "done": True, "extra_logs": self._logs(self.session)}
        turn = self.session.num_turns
        after_action = self.session.num_tokens + len(generation.token_ids)
        result = await self.session.step(generation.token_ids, logprobs=generation.logprobs, finish_reason=generation.finish_reason)
        # Everything the session appended after the action: a closing end-of-turn for a cut turn, then the observation.
        feedback_ids = self.session.context_ids[after_action:]
        trajectory = self.session.trajectory()
        shaped = self._episode.config.reward_gamma**turn * float(result.reward)
        feedback = self._episode.tokenizer.decode(feedback_ids, skip_special_tokens=False)
        self._episode.handed = (feedback, feedback_ids)  # OpenRLHF encodes the text next: it gets these ids
        return {
            "rewards": torch.tensor(shaped),
            "scores": float(trajectory.episode_return),
            "environment_feedback": feedback,
            "done": result.done,
            "extra_logs": self._logs(self.session),
        }

    @staticmethod
    def _logs(session: EpisodeSession) -> dict[str, float]:
        """The core's episode metrics (env errors, truncation, turns, success) for OpenRLHF's ``extra_logs``."""
        return {f"gem/{k}": float(v) for k, v in session.trajectory().metrics.items() if isinstance(v, (int, float, bool))}


class GemAgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's stock multi-turn executor running :class:`GemAgentInstance`; subclass it in the agent file.

    Set ``config`` on the subclass (``config = AgentConfig(reward_gamma=0.9)``); OpenRLHF builds it with no arguments.
    """

    config: AgentConfig = AgentConfig()
    instance_cls: type[GemAgentInstance] = GemAgentInstance

    def __init__(self) -> None:
        super().__init__(self.instance_cls)
        self._copies: dict[int, _Copies] = {}  # by id of the sampling_params a prompt's copies share

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        """Play one GEM episode for a prompt; OpenRLHF's rollout worker calls this per sample.

        Runs OpenRLHF's own multi-turn loop with a :class:`GemAgentInstance`, recording each turn's sampled ids
        so the env is stepped with them and handing OpenRLHF the session's ids for the env's text, then adds the
        curriculum's metrics and flags an episode the token budget ended as truncated. ``max_tokens`` in
        ``sampling_params`` (``--rollout.max_new_tokens``) caps each turn; the first observation is never cut to
        make room for it (``max_length`` alone bounds the episode, as the session's budget), and an episode
        whose prompt leaves no room for a turn is its prompt alone (``action_ranges`` empty).

        Args:
            prompt (str): The dataset's prompt text (replaced by the env's first observation).
            label (str): The dataset row's GEM label (env id, seed, env kwargs).
            sampling_params (vllm.SamplingParams): Shared by the prompt's copies (each copy works on its own copy).
            max_length: Most tokens of prompt and response together.
            hf_tokenizer (PreTrainedTokenizerBase): The policy's tokenizer.
            llm_engine (Any): OpenRLHF's vLLM engine.
            images (list | None): The prompt's images, passed through to OpenRLHF's loop.

        Returns:
            (dict[str, Any]): OpenRLHF's result dict (``observation_tokens``, ``action_ranges``, ``reward``, ``scores``,
            ``rollout_log_probs``, ``truncated``, ``extra_logs``, ...).

        Raises:
            LabelError: The label does not name a GEM episode.
        """
        # A copy of its own: OpenRLHF's execute writes this copy's remaining budget into the params every turn, and
        # reads them to cut the first observation; shared with the prompt's other copies, a copy that was still
        # resetting its env had its first observation cut to another copy's length.
        params = copy.deepcopy(sampling_params)
        # OpenRLHF cuts the first observation to max_length - max_tokens, which the session (whose budget is max_length)
        # never sees: --rollout.max_new_tokens instead caps each turn (_RecordingEngine), and None leaves the cut to a
        # prompt that fills max_length, which ends the session at reset.
        episode = _Episode(config=self.config, tokenizer=hf_tokenizer, max_length=max_length, turn_cap=params.max_tokens)
        params.max_tokens = None
        group = await self._copy_arrived(sampling_params)
        # Each execute runs in its own task (OpenRLHF gathers them), so the variable is per episode.
        token = _CURRENT_EPISODE.set(episode)
        try:
            result = await super().execute(
                prompt, label, params, max_length, _SessionTokenizer(hf_tokenizer, episode), _RecordingEngine(llm_engine, episode), images=images
            )
        finally:
            _CURRENT_EPISODE.reset(token)
            self._copy_finished(group)
            if episode.session is not None:
                await episode.session.aclose()
        assert episode.session is not None  # reset() made it before execute() could return
        if episode.session.num_turns == 0:
            # The prompt left no room for a turn (the session ended at reset), but OpenRLHF samples whenever max_length
            # is not reached: that token, which the env never saw, would be trained. The prompt alone, as OpenRLHF
            # returns a prompt that fills max_length (no action span: action_mask all 0).
            prompt_ids = list(episode.session.trajectory().prompt_ids)
            result["observation_tokens"], result["action_ranges"] = prompt_ids, []
            if result["rollout_log_probs"] is not None:
                result["rollout_log_probs"] = [0.0] * len(prompt_ids)
        await episode.starts.finish(episode.start, episode.session.trajectory())  # tags the task, updates a sampler
        # Only keys every sample has: OpenRLHF averages each extra_logs key over the batch. The gem/* ones are the
        # episode's as it ended: a prompt that filled max_length never reached step(), where they are set, and a sample
        # without them failed the batch's merge.
        result["extra_logs"].update(GemAgentInstance._logs(episode.session))
        result["extra_logs"].update({k: v for k, v in (await episode.starts.metrics()).items() if not k.endswith("/success")})
        # OpenRLHF flags only a last turn cut by max_tokens; an episode the token budget ended is cut too.
        result["truncated"] = result["truncated"] or episode.session.trajectory().metrics["truncated_by"] == "max_total_tokens"
        return result

    async def _copy_arrived(self, sampling_params: Any) -> _Copies | None:
        """Count this copy into its prompt's group, the copies sharing its ``sampling_params`` object (OpenRLHF 0.11's
        ``generate_responses`` gives them one and gathers them); with a curriculum, warn before any copy draws its
        start if the group's size is not ``n_samples_per_prompt``."""
        if not self.config.curriculum:
            return None  # every copy starts at the row's label: the count changes nothing
        group = self._copies.setdefault(id(sampling_params), _Copies(sampling_params))  # holds it: its id stays unique
        group.arrived += 1
        group.running += 1
        try:
            # One turn of the event loop: the gathered copies were all scheduled together, so each of them arrives
            # here before any goes on to draw a start.
            await asyncio.sleep(0)
        except BaseException:
            self._copy_finished(group)
            raise
        if not group.checked:
            group.checked = True
            if group.arrived != self.config.n_samples_per_prompt:
                self._warn_copy_count(group.arrived)
        return group

    def _copy_finished(self, group: _Copies | None) -> None:
        if group is None:
            return
        group.running -= 1
        if group.running == 0:
            del self._copies[id(group.params)]

    def _warn_copy_count(self, copies: int) -> None:
        configured = self.config.n_samples_per_prompt
        effect = ("the copies past the first n_samples_per_prompt draw starts of their own" if copies > configured else
                  "the label's start stays open, so the next copies of that label share it")
        warnings.warn(
            f"OpenRLHF ran {copies} copies of a prompt but the agent file sets AgentConfig(n_samples_per_prompt={configured}) "
            f"with a curriculum, so the prompt's copies do not share one episode start ({effect}). Set n_samples_per_prompt "
            "to --rollout.n_samples_per_prompt, and --eval.n_samples_per_prompt (OpenRLHF's default is 4) to the same "
            "number, or leave --eval.dataset unset (a curriculum draws the starts of eval rows too).",
            CopyCountWarning,
            stacklevel=2,
        )
