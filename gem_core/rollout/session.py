"""One episode in driven mode: the framework generates, the session steps the env and keeps the books.

Some frameworks run the generation loop themselves and call the environment once per turn (OpenRLHF's
agent step, RL2's env functions). :class:`EpisodeSession` is what they call: it owns one env and the
episode's token bookkeeping. :func:`gem_core.rollout.runner.run_episode` (drive mode) is a loop over the
same session, so both modes produce identical :class:`~gem_core.rollout.trajectory.TokenTrajectory`.

Per turn, the session appends to the response:

1. the sampled action ids, loss mask 1, with their log-probabilities (and, when given, the policy version
   that sampled each, ``TokenTrajectory.token_versions``);
2. if the action did not end with the template's end-of-turn token (cut by the length limit, or
   stopped at another stop token): :meth:`ChatTemplate.close_turn_ids`, loss mask 0;
3. unless the episode ended: :meth:`ChatTemplate.observation_ids` of the env's answer (the template's
   text after end-of-turn, the user turn, the generation prompt), loss mask 0.

Nothing already in the sequence is ever re-encoded. Limits: ``max_turns`` is the trainer's turn budget
(verl's ``max_assistant_turns``, RL2's ``rollout.max_turns``) and truncates after that many turns; the
env's own limit, part of the task (a game tells the player how many turns are left), is its spec's,
set by ``gem_core.make(id, max_turns=)``; the lower of the two ends the episode. ``max_total_tokens`` bounds ``len(prompt_ids + response_ids)``: :meth:`generation_budget`
leaves room to close a cut turn, an action longer than the budget is clipped, and an observation that
would not leave room for one more token truncates the episode instead of being appended.

An exception raised by the env's step, or by the chat template while appending the observation,
ends the episode as truncated with ``info["error"]`` (one broken tool call must not crash a run of
thousands of episodes); it is logged once per env id on the ``gem.rollout`` logger. A turn whose
generation was aborted is kept in the books but not sent to the env, and ends the episode as truncated.

History modes (``history=``, see :data:`~gem_core.rollout.chat_template.HISTORY_MODES`): with
``"as_sampled"`` the policy's next context is the growing sequence; with ``"as_rendered"`` it is the
conversation as the chat template renders it (earlier thinking stripped), rebuilt one turn at a time,
and the trajectory records each turn's context for
:meth:`~gem_core.rollout.trajectory.TokenTrajectory.as_transitions`. Token limits always count the
as-sampled sequence.

A session owns its env: ``await session.aclose()`` (or ``async with EpisodeSession(...)``) closes it.
"""

from __future__ import annotations

import copy
import logging
import math
import numbers
import operator
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gem_core.env import Env, check_seed, episode_success, warn_once
from gem_core.errors import InvalidArgument, ResetNeeded, UsageError
from gem_core.protocols import Tokenizer
from gem_core.rollout.chat_template import ChatTemplate, RenderedWindow
from gem_core.rollout.options import EpisodeOptions, episode_options
from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rollout.trajectory_io import encode_env_state
from gem_core.rollout.vision import ImageEncoder, TrajectoryImage, is_processor, text_tokenizer
from gem_core.rows.label import EpisodeLabel, make_label_env, parse_label

__all__ = ["EpisodeSession", "SessionStep"]

logger = logging.getLogger("gem.rollout")

_ENV_ASTEP = Env.astep  # an env that keeps it steps inline when not blocking (see EpisodeSession._act)


def _types_in(values: Any) -> str:
    """The element types of a bad ``action_ids``, named for its error (it may not even be iterable, or be an iterator
    that the failed conversion used up)."""
    try:
        types = sorted({type(v).__name__ for v in values})
    except TypeError:
        types = []
    return "elements of type " + ", ".join(types) if types else f"a value of type {type(values).__name__}"


def _ends_turn(ids: tuple[int, ...], end_of_turn_ids: Sequence[int]) -> bool:
    """Whether an action's ids end with the end-of-turn ids (:meth:`ChatTemplate.ends_turn`, for the books' tuples)."""
    n = len(end_of_turn_ids)
    return 0 < n <= len(ids) and ids[-n:] == tuple(end_of_turn_ids)


def _is_image(image: Any) -> bool:
    """Whether ``image`` is a PIL image or an array (what image processors take)."""
    if hasattr(image, "__array__") and hasattr(image, "shape"):
        return True
    pil = sys.modules.get("PIL.Image")  # a PIL image exists only once PIL is imported
    return pil is not None and isinstance(image, pil.Image)


def _image_size(image: Any) -> str:
    """An image's size for an error: PIL's width x height, or an array's shape."""
    size = getattr(image, "size", None)
    return f"{size[0]}x{size[1]}" if isinstance(size, tuple) and len(size) == 2 else f"shape {tuple(getattr(image, 'shape', ()))}"


def _encodes(encoder: ImageEncoder, image: Any) -> bool:
    """Whether the processor encodes ``image`` alone (to name the one image of a list it failed on)."""
    try:
        encoder.encode([image])
    except Exception:  # noqa: BLE001 - any failure names this image
        return False
    return True


def _warn_once(env_id: str | None, error: str) -> None:
    """Log the first error per env id: errors become truncations (reward 0) and must not pass unseen."""
    warn_once(
        logger,
        ("episode-error", env_id),
        "Episode of env %r ended by an error (truncated, reward 0; later errors of this env are counted in "
        "trajectory_metrics()['env_error_rate'] but not logged): %s",
        env_id,
        error,
    )


#: What the env's step gave a turn: ``(observation, reward, terminated, truncated, info, images)``, checked.
_Outcome = tuple[str, float, bool, bool, dict[str, Any], Any]


def _env_outcome(result: Any) -> _Outcome:
    """An env step's result, checked and made the session's own (its info copied, the images taken out of it)."""
    observation, reward, terminated, truncated, info = result
    if not ((type(reward) is float or isinstance(reward, numbers.Real)) and math.isfinite(reward)):
        # One NaN normalized with the batch's returns makes every advantage NaN.
        raise InvalidArgument(f"the env's reward is {reward!r}; rewards must be finite numbers")
    if not isinstance(observation, str):  # else a template error far from the cause
        raise InvalidArgument(f"the env's observation is a {type(observation).__name__}; an episode's observations are text")
    info = dict(info)
    return observation, float(reward), bool(terminated), bool(truncated), info, info.pop("images", None)


@dataclass(slots=True)  # one per turn: no per-instance dict to allocate and for the GC to track
class SessionStep:  # fields in the order EpisodeSession.step passes them
    """What one :meth:`EpisodeSession.step` did."""

    observation_ids: list[int]
    """Env tokens appended after the action (loss mask 0); [] when the episode is done. With
    ``history="as_rendered"`` the next context is not the old one plus these: use ``session.context_ids``."""
    observation: str
    """The env's observation text."""
    reward: float
    terminated: bool
    truncated: bool
    """The env truncated the episode, or the session did (max_turns, max_total_tokens, an env error)."""
    done: bool
    """``terminated or truncated``."""
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _RenderedBooks:
    """``history="as_rendered"``: the conversation as the template shows it, what the policy saw of it before each
    turn, and the turns a later message could still re-render (:class:`RenderedWindow`)."""

    ids: list[int]
    context_ends: list[int] = field(default_factory=list)
    window: RenderedWindow = field(default_factory=RenderedWindow)


class EpisodeSession:
    """One episode in driven mode: the framework generates, the session steps the env and keeps the books.

    Args:
        env: a :class:`gem_core.Env` (its ``areset``/``astep`` are used, so a slow step never blocks the loop).
        tokenizer: the policy's tokenizer, or a vision model's processor (then envs may show images,
            see :mod:`gem_core.rollout.vision`).
        options: the episode options (:class:`~gem_core.rollout.options.EpisodeOptions`, checked once where they
            were read); or the same options as the keywords below (not both).
        chat_template: the deltas to use; default: :meth:`ChatTemplate.for_tokenizer` (probed once per tokenizer).
        system_prompt: a system message before the first user turn (only when ``chat_template`` is None).
        max_turns: truncate the episode after this many turns.
        max_total_tokens: bound on ``len(prompt_ids) + len(response_ids)``.
        max_response_tokens: bound on ``len(response_ids)`` (all turns, env tokens included), the form
            trainers state their budget in (TRL's ``max_completion_length``, verl's ``response_length``).
        env_id: recorded in the trajectory.
        history: ``"as_sampled"`` (default) or ``"as_rendered"``, see the module docstring.
        chat_template_kwargs: template variables (e.g. ``{"enable_thinking": False}``), only when
            ``chat_template`` is None; adapters pass their framework's own kwargs here.
        record_env_states: keep the env's state before each turn's action in the trajectory
            (``TokenTrajectory.env_states``), so a stored episode can be branched at any turn; costs a
            copy and a pickle of the state per turn.

    Raises:
        InvalidArgument: if an option breaks its rule (:class:`~gem_core.rollout.options.EpisodeOptions`), both
            ``options`` and an option keyword are given, ``record_env_states`` is set for an env without
            ``get_state``, or ``system_prompt``/``chat_template_kwargs`` contradict the ``chat_template`` given.
    """

    # Every session, however made, sets the same 27 attributes, all in __init__: CPython 3.11 then shares their names
    # among all sessions and keeps each session's values inline. Past 29 names (fewer once sessions exist, or after a
    # constructor raised), or with a name first set later, each of hundreds of sessions in flight had a dict of its own,
    # slower to read and scattered in memory (38 names did, issue 46; tests/rollout/test_session.py holds the rule). So
    # the options are read through properties, "started" is "holds an observation", "done" is "terminated or truncated",
    # the last observation ends the list of observations, the as_rendered books are one attribute, and only fork()
    # branches, made as copies with dicts of their own, set one more.
    fork_turn: int | None = None
    """On a branch made by :meth:`fork`: the turns it shares with the session it was forked from."""

    @property
    def history(self) -> str:
        """``"as_sampled"`` or ``"as_rendered"`` (the options')."""
        return self.options.history

    @property
    def max_turns(self) -> int | None:
        """The turn limit (the options'); None: none."""
        return self.options.max_turns

    @property
    def max_total_tokens(self) -> int | None:
        """The bound on prompt and response tokens together (the options'); None: none."""
        return self.options.max_total_tokens

    @property
    def max_response_tokens(self) -> int | None:
        """The bound on response tokens, env tokens included (the options'); None: none."""
        return self.options.max_response_tokens

    @property
    def record_env_states(self) -> bool:
        """Whether each turn's env state is kept in the trajectory (the options')."""
        return self.options.record_env_states

    @property
    def done(self) -> bool:
        """Whether the episode is over (terminated or truncated): the next one begins with :meth:`start`."""
        return self._terminated or self._truncated

    @property
    def processor(self) -> Any:
        """The vision model's processor the session was given (None: a tokenizer)."""
        return None if self.image_encoder is None else self.image_encoder.processor

    def __init__(
        self,
        env: Any,
        tokenizer: Tokenizer,
        *,
        options: EpisodeOptions | None = None,
        chat_template: ChatTemplate | None = None,
        system_prompt: str | None = None,
        max_turns: int | None = None,
        max_total_tokens: int | None = None,
        max_response_tokens: int | None = None,
        env_id: str | None = None,
        history: str = "as_sampled",
        chat_template_kwargs: dict | None = None,
        record_env_states: bool = False,
    ):
        options = episode_options(
            options, "EpisodeSession", system_prompt=system_prompt, max_turns=max_turns, max_total_tokens=max_total_tokens,
            max_response_tokens=max_response_tokens, history=history, chat_template_kwargs=chat_template_kwargs,
            record_env_states=record_env_states,
        )
        system_prompt = options.system_prompt
        chat_template_kwargs = None if options.chat_template_kwargs is None else dict(options.chat_template_kwargs)
        if chat_template is not None and chat_template_kwargs and chat_template.chat_template_kwargs != {
            **chat_template.chat_template_kwargs,
            **chat_template_kwargs,
        }:
            raise InvalidArgument(
                "Pass chat_template_kwargs to ChatTemplate(tokenizer, chat_template_kwargs=...) when you also pass "
                f"chat_template; got {chat_template_kwargs!r} but the template has {chat_template.chat_template_kwargs!r}."
            )
        if chat_template is not None and system_prompt is not None and chat_template.system_prompt != system_prompt:
            raise InvalidArgument(
                "Pass the system prompt to ChatTemplate(tokenizer, system_prompt=...) when you also pass chat_template; "
                f"got system_prompt={system_prompt!r} but the template has {chat_template.system_prompt!r}."
            )
        if options.record_env_states and not callable(getattr(env, "get_state", None)):
            raise InvalidArgument(
                f"record_env_states=True needs an env with get_state(); {type(env).__name__} has none (an env served "
                "elsewhere keeps its state there). Record without states, or run the env in-process."
            )
        self.options = options
        self.env = env
        # A vision model's processor goes where the tokenizer goes: its tokenizer does the text, its
        # image processor the images (gem_core.rollout.vision).
        self.image_encoder = ImageEncoder(tokenizer) if is_processor(tokenizer) else None
        tokenizer = text_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.chat_template = chat_template or ChatTemplate.for_tokenizer(
            tokenizer, system_prompt=system_prompt, chat_template_kwargs=chat_template_kwargs
        )
        self._token_limit = options.max_total_tokens  # the tighter of the two bounds, known once the prompt is
        self.env_id = env_id
        self.label: EpisodeLabel | None = None  # the dataset row, on a session made by from_label()
        self._new_books()
        self._reset_books(seed=None)

    def _new_books(self) -> None:
        """The episode's lists, made once per session (or per branch, by :meth:`fork`'s copy).

        Each episode clears them in place (:meth:`_reset_books`): :meth:`trajectory` copies out of them, and lists
        that live as long as the session sit in the garbage collector's oldest generation, where a fresh set per
        episode was traversed, every id of the sequence included, by the young collections (issue 46)."""
        # The sequence (prompt + response) is the prompt and what was flushed into it, then the pieces not flushed yet: each
        # turn's action ids, closing ids and observation delta (the template's own shared tuple), as tuples. A turn adds
        # pieces; the one list grows only when the context is read (borrow_context_ids, a policy in drive mode) or at the
        # trajectory. A driven episode (the framework keeps the context) never grows it: at 512 episodes in flight its
        # growth by reallocation and copy was a fifth of a turn's last-level cache misses (issue 46).
        self._ids: list[int] = []
        self._pending: list[Sequence[int]] = []
        # Per turn, not per token: the loss mask is 1 exactly on the turn spans, and log-probs and versions
        # are the defaults (0.0, -1) outside them, so trajectory() assembles the per-token lists once per
        # episode instead of every turn extending four lists (the step stays O(turn), not O(tokens) twice).
        self._turn_spans: list[tuple[int, int]] = []
        # None: the framework gave none (all 0.0); versions None: no version known (all -1). Tuples, not lists: kept till the
        # episode ends, a tuple of numbers is untracked by the garbage collector at its first pass, where a list is moved on
        # to the oldest generation, and each object there brings the next full collection nearer (issue 46). Separate
        # lists: a span that held its log-probs' tuple would stay tracked (the collector reaches the inner tuple later).
        self._turn_logprobs: list[tuple[float, ...] | None] = []
        # Up to the last turn a versioned policy sampled: the unversioned turns after it are not appended (None), so an
        # episode no versioned policy plays never touches this list, one cold cache line less per turn (issue 46).
        self._turn_versions: list[tuple[int, ...] | None] = []
        self._rewards: list[float] = []
        self._observations: list[str] = []  # the first, one per turn that continued, then the last (see _end)
        self._actions: list[str] = []
        self._infos: list[dict[str, Any]] = []
        self._env_states: list[str] = []

    def _reset_books(self, seed: int | None) -> None:
        self.seed = seed
        for books in (self._ids, self._pending, self._turn_spans, self._turn_logprobs, self._turn_versions, self._rewards, self._observations,
                      self._actions, self._infos, self._env_states):
            books.clear()
        self._prompt_len = self._num_tokens = 0
        self._terminated = False
        self._truncated = False
        self._truncated_by: str | None = None
        self._rendered: _RenderedBooks | None = None  # "as_rendered" only, made by start()
        self._images: list[TrajectoryImage] = []  # made anew, not cleared: _end replaces it with a filtered copy
        self.reset_info: dict[str, Any] = {}  # the env's reset info, set by start()

    # -- state ----------------------------------------------------------------------------------

    @property
    def context_ids(self) -> list[int]:
        """What the policy sees next (a copy): prompt + response so far, or with ``history="as_rendered"``
        the template's rendering of the conversation plus the generation prompt."""
        ids = self.borrow_context_ids()
        return list(ids) if ids is self._ids else ids

    def borrow_context_ids(self) -> list[int]:
        """:attr:`context_ids` without the copy: the session's own list, which the next call after a :meth:`step`
        extends in place with that turn's ids (with ``history="as_rendered"``, a new list). For a policy that reads the context only until its turn
        is sampled (``borrows_prompt_ids``): a copy per turn is the whole context again, and at 2,000-id contexts
        it and the garbage collector's traversals of it were a quarter of drive mode's instructions (issue 46)."""
        if self._rendered is not None:
            return self._rendered.ids + self.chat_template.generation_prompt_ids
        if self._pending:
            ids = self._ids
            for piece in self._pending:
                ids += piece
            self._pending.clear()
        return self._ids

    @property
    def images(self) -> list[TrajectoryImage]:
        """The images in :attr:`context_ids` so far, in order (a copy); a vision policy gets them beside the ids."""
        return list(self._images)

    @property
    def num_tokens(self) -> int:
        """Tokens in the episode so far, prompt and responses together."""
        return self._num_tokens

    @property
    def num_turns(self) -> int:
        """Turns stepped so far."""
        return len(self._turn_spans)

    @property
    def oldest_version(self) -> int | None:
        """The oldest policy version among the tokens sampled so far (None: none carries a version)."""
        return min((v for tags in self._turn_versions if tags for v in tags if v >= 0), default=None)

    def generation_budget(self, max_new_tokens: int) -> int:
        """How many tokens the next turn may sample: ``max_new_tokens`` clipped so that the sequence,
        with a closing end-of-turn if the turn is cut, stays within the token bounds."""
        if self._token_limit is None:
            return max_new_tokens
        room = self._token_limit - self._num_tokens - len(self.chat_template.close_turn_ids())
        return max(0, min(max_new_tokens, room))

    # -- episode --------------------------------------------------------------------------------

    @classmethod
    def from_label(
        cls, label: str | Mapping[str, Any] | EpisodeLabel, tokenizer: Tokenizer, *, fix_hint: str | None = None, **session_kwargs: Any
    ) -> EpisodeSession:
        """The session for one dataset row: the env its label names, made with the label's kwargs.

        Every adapter that receives rows (OpenRLHF's label, RL2's extra_info, verl's extra_info) starts
        episodes this way, so a bad row fails the same way everywhere. :meth:`start` without a seed then
        resets with the label's seed.

        Raises:
            gem_core.rows.label.LabelError: the label is malformed or names an unknown env
                (the message ends with ``fix_hint``), or its ``env_kwargs`` do not fit the env
                (:class:`~gem_core.rows.EnvKwargsError`).
        """
        if not isinstance(label, EpisodeLabel):
            label = parse_label(label) if fix_hint is None else parse_label(label, fix_hint=fix_hint)
        env = make_label_env(label)  # here, or in a Ray actor (GEM_ENV_BACKEND=ray)
        try:
            session = cls(env, tokenizer, env_id=label.env_id, **session_kwargs)
        except BaseException:  # a refused session keyword: the env (its tools, servers, actor) has no other owner
            env.close()
            raise
        session.label = label
        return session

    def fork(self, n: int) -> list[EpisodeSession]:
        """``n`` sessions that continue from this one's current turn: same token prefix, same env state.

        Group-based RL compares several continuations from one state; for a multi-turn env the useful
        state is mid-episode, not only the reset seed. Each branch gets its own copy of the books (one
        copy at the fork, never per turn) and an env spawned with ``spawn(same_state=True)``, so the
        branches and this session evolve independently. ``metrics["fork_turn"]`` of a branch's
        trajectory says how many turns were shared.

        Raises:
            ResetNeeded: the session has not started.
            InvalidArgument: ``n`` is not a positive int.
            UsageError: the env cannot spawn (it has no ``spawn``).
            Exception: what the env's ``spawn`` raised (the branches spawned before it are closed).
        """
        if not self._observations:  # start() appends the first one
            raise ResetNeeded("Call `await session.start(seed)` before `fork`.")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidArgument(f"fork(n) needs a positive number of branches, got {n!r}.")
        spawn = getattr(self.env, "spawn", None)
        if spawn is None:
            raise UsageError(f"{type(self.env).__name__} has no spawn(); only envs with state snapshots can be forked.")
        shared = {"env", "tokenizer", "image_encoder", "chat_template", "label"}
        books = {name: value for name, value in vars(self).items() if name not in shared}
        branches: list[EpisodeSession] = []
        try:
            for _ in range(n):
                branch = copy.copy(self)
                branch.__dict__.update(copy.deepcopy(books))
                branch.env = spawn(same_state=True)
                branch.fork_turn = self.num_turns
                branches.append(branch)
        except BaseException:  # the branches made so far have no other owner: their envs would stay open
            for made in branches:
                made.env.close()
            raise
        return branches

    async def start(self, seed: int | None = None, options: dict | None = None) -> list[int]:
        """Reset the env and return the prompt ids (system prompt, first observation, generation prompt).

        ``seed=None`` on a session made by :meth:`from_label` uses the label's seed.

        If the prompt alone leaves no room for one sampled token within ``max_total_tokens``, the
        session is done at once (truncated, zero turns).

        Raises:
            InvalidArgument: ``seed`` is not None or a whole number from 0 to :data:`~gem_core.env.MAX_SEED` (the
                session is left as it was), or the env's reset returned an observation that is not text, or an info
                that is not a dict, or its ``info["images"]`` is not a list of PIL images or arrays the processor
                encodes, or the session cannot show images (a tokenizer given, or ``history="as_rendered"``).
            Exception: what the env's reset raised (no episode starts: there is no prompt to record).
        """
        if seed is None and self.label is not None:
            seed = self.label.seed
        seed = check_seed(seed)  # a numpy seed (drawn with numpy, read from a column) is recorded as a Python int
        self._reset_books(seed)
        observation, info = await self.env.areset(seed=seed, options=options)
        if not isinstance(observation, str) or not isinstance(info, Mapping):  # else a template error far from the cause
            raise InvalidArgument(
                f"the env's reset returned a {type(observation).__name__} observation and a {type(info).__name__} info; "
                "an episode's observations are text and its info a dict"
            )
        info = dict(info)
        encoded = self._encode_images(info.pop("images", None), info)
        prompt_ids = self.chat_template.initial_ids(observation, images=len(encoded))
        if encoded:
            prompt_ids = self._place_images(prompt_ids, encoded, turn=0, offset=0)
        self._ids += prompt_ids  # the books' own list, cleared by _reset_books
        if self.options.history == "as_rendered":
            self._rendered = _RenderedBooks(self.chat_template.rendered_prompt_ids(observation))
        self._prompt_len = self._num_tokens = len(self._ids)
        limit, response_limit = self.options.max_total_tokens, self.options.max_response_tokens
        if response_limit is not None:  # the tighter of the two bounds
            limit = self._prompt_len + response_limit if limit is None else min(limit, self._prompt_len + response_limit)
        self._token_limit = limit
        self._observations.append(observation)
        self.reset_info = info  # the session's own copy (made above)
        if self.generation_budget(1) < 1:
            self._truncate("max_total_tokens")
        return list(self._ids)

    async def step(
        self,
        action_ids: list[int] | None = None,
        *,
        action_text: str | None = None,
        logprobs: list[float] | None = None,
        finish_reason: str = "stop",
        versions: int | Sequence[int] | None = None,
    ) -> SessionStep:
        """Record one sampled turn, step the env with its text, append the observation's delta tokens.

        Args:
            action_ids: the sampled ids, exactly as sampled (end-of-turn token included if sampled).
                Prefer ids: the session keeps them verbatim.
            action_text: the action as text, when the framework has no ids (then the text is encoded, and
                with ``finish_reason="stop"`` the end-of-turn ids are counted as sampled; a text that kept its
                end-of-turn text is closed by it, and the env gets the text without it). With ids too, this text
                goes to the env instead of the decoded ids.
            logprobs: one per action id (None: recorded as 0.0; ``metrics["has_logprobs"]`` says so).
            finish_reason: ``"stop"``, ``"length"`` or ``"abort"``. An aborted turn is recorded but not
                sent to the env; the episode ends truncated (``info["truncated_by"] == "abort"``).
            versions: the policy version that sampled the action: one int for the whole turn, or one per
                action id (``Generation.versions``); None: unknown (-1 in ``token_versions``).

        Raises:
            ResetNeeded: before :meth:`start`, or after the episode ended.
            InvalidArgument: if neither ``action_ids`` nor ``action_text`` is given, or the ids are ones the tokenizer
                cannot decode (negative, or past what it takes); nothing is recorded then. Also when the env shows
                images to a session that cannot show them (a tokenizer given, or ``history="as_rendered"``).
        """
        if not self._observations:  # start() appends the first one
            raise ResetNeeded("Call `await session.start(seed)` before `step`.")
        if self._terminated or self._truncated:  # self.done, without a call every turn
            raise ResetNeeded("The episode is over (session.done is True); start a new one with `await session.start(seed)`.")
        if action_ids is None and action_text is None:
            raise InvalidArgument("step() needs the sampled action_ids (preferred) or the action_text.")
        if action_ids is None:
            ids, action_text = self._encode_action(action_text or "", finish_reason)
        else:
            try:  # numpy or torch ids become ints; operator.index takes half int()'s time and refuses floats and text
                ids = tuple(map(operator.index, action_ids))  # a tuple: the books keep it (see _new_books)
            except TypeError:
                raise InvalidArgument(f"step() needs integer action_ids; got {_types_in(action_ids)}.") from None
        lps = None if logprobs is None else tuple(map(float, logprobs))  # a tuple: see _new_books
        if lps is None or action_ids is None or len(lps) != len(ids):  # one log-prob per sampled id needs nothing more
            lps = self._action_logprobs(ids, lps, text_mode=action_ids is None, finish_reason=finish_reason)
        tags = None if versions is None else self._action_versions(ids, versions)
        action_text, clipped = self._record_action(ids, lps, action_text, tags)
        outcome = self._act(action_text, finish_reason)
        observation, reward, terminated, truncated, info, images = outcome or await self._act_awaited(action_text)
        if clipped:
            info["action_clipped"] = True
        self._rewards.append(reward)
        self._infos.append(info)
        observation_ids: tuple[int, ...] = ()
        if terminated or truncated:
            continues = False
        else:
            continues, truncated, observation_ids, rendered_turn = self._observation_turn(observation, action_text, images, info)
        if continues:
            self._pending.append(observation_ids)  # env tokens: loss mask 0, log-prob 0.0, version -1 (trajectory())
            self._num_tokens += len(observation_ids)
            self._observations.append(observation)
            if self._rendered is not None:
                self._rendered.ids += rendered_turn
        else:
            self._end(observation, terminated, truncated)
        # The caller gets a list of its own (the books keep the template's shared tuple). Positional: half the time of
        # keywords, and this runs every turn.
        return SessionStep(list(observation_ids), observation, reward, terminated, truncated, not continues, info)

    def _action_logprobs(self, ids: tuple[int, ...], logprobs: tuple[float, ...] | None, *, text_mode: bool, finish_reason: str) -> tuple[float, ...] | None:
        """One log-prob per action id, 0.0 for the end-of-turn ids added to an action given as text; None
        where the framework gave none (recorded as 0.0; ``metrics["has_logprobs"]`` says so)."""
        if logprobs is None:
            return None
        lps = logprobs  # step's own tuple of floats
        if text_mode and finish_reason == "stop" and len(lps) == len(ids) - len(self.chat_template.end_of_turn_ids):
            lps += (0.0,) * len(self.chat_template.end_of_turn_ids)  # text mode: the end-of-turn ids were added here, without logprobs
        if len(lps) != len(ids):
            raise InvalidArgument(f"Got {len(ids)} action ids but {len(lps)} logprobs; need one per id.")
        return lps

    def _action_versions(self, ids: tuple[int, ...], versions: int | Sequence[int] | None) -> tuple[int, ...] | None:
        """One version per action id (None: unknown); the end-of-turn ids added to a text action take the
        turn's last version."""
        if versions is None:
            return None
        if isinstance(versions, bool) or isinstance(versions, (str, bytes)):  # True is an int, "77" iterates to 7s
            raise InvalidArgument(f"step() got versions={versions!r}; give one int for the turn or one int per action id.")
        if isinstance(versions, (int, numbers.Integral)):
            return (int(versions),) * len(ids)
        try:  # operator.index, as for the ids: int() truncated floats (2.9 -> 2) and parsed text
            values = versions if isinstance(versions, (list, tuple)) else tuple(versions)
            if bool in set(map(type, values)):  # operator.index takes True as 1
                raise TypeError
            tags = tuple(map(operator.index, values))
        except TypeError:
            raise InvalidArgument(f"step() needs integer versions (one for the turn or one per action id); got {_types_in(versions)}.") from None
        if tags and len(tags) < len(ids) and len(ids) - len(tags) == len(self.chat_template.end_of_turn_ids):
            tags += (tags[-1],) * (len(ids) - len(tags))  # text mode: end-of-turn ids added here
        if len(tags) != len(ids):
            raise InvalidArgument(f"Got {len(ids)} action ids but {len(tags)} versions; need one per id (or one int per turn).")
        return tags

    def _record_action(
        self, ids: tuple[int, ...], lps: tuple[float, ...] | None, action_text: str | None, versions: tuple[int, ...] | None
    ) -> tuple[str, bool]:
        """Append the sampled ids verbatim (clipped to the budget, the turn closed if it was cut) and the
        action's text; returns the text the env gets and whether the ids were clipped."""
        clipped = False
        if self._token_limit is not None:
            budget = self.generation_budget(len(ids))  # it keeps room for a closing id, which a closed turn needs not
            clipped = budget < len(ids) and not (
                len(ids) <= self._token_limit - self._num_tokens and _ends_turn(ids, self.chat_template.end_of_turn_ids)
            )
            if clipped:
                ids = ids[:budget]
                lps = None if lps is None else lps[:budget]
                versions = None if versions is None else versions[:budget]
        template = self.chat_template
        eot = template.end_of_turn_ids
        n = len(eot)  # ChatTemplate.ends_turn, without copies for the usual single end-of-turn token
        closed = len(ids) >= n and (ids[-1] == eot[0] if n == 1 else list(ids[-n:]) == eot)
        if action_text is None or clipped:
            content = ids[: len(ids) - n] if closed else ids
            try:  # nothing is recorded yet: a refused turn leaves the episode as it was
                if template.tokenizer is self.tokenizer:  # the template remembers short actions' texts
                    action_text = template.decode_action(content)
                else:
                    action_text = self.tokenizer.decode(list(content), skip_special_tokens=True)
            except (OverflowError, TypeError) as error:  # a negative or huge id from the engine: the tokenizer's own error
                raise InvalidArgument(f"step() got token ids the tokenizer cannot decode ({error}); ids are whole numbers from 0 "
                                      "below the vocabulary size, as the engine sampled them.") from None
        start = self._num_tokens - self._prompt_len
        if self._rendered is not None:
            self._rendered.context_ends.append(len(self._rendered.ids))
        self._pending.append(ids)
        self._turn_spans.append((start, start + len(ids)))
        self._turn_logprobs.append(lps)
        if versions is not None:  # see _new_books: an unversioned turn's None is left out at the end
            self._turn_versions += [None] * (len(self._turn_spans) - 1 - len(self._turn_versions))
            self._turn_versions.append(versions)
        self._num_tokens += len(ids)
        if not closed:
            close = tuple(template.close_turn_ids())
            self._pending.append(close)
            self._num_tokens += len(close)
        self._actions.append(action_text)
        return action_text, clipped

    def _act(self, action_text: str, finish_reason: str) -> _Outcome | None:
        """Step the env with the action: ``(observation, reward, terminated, truncated, info, images)``. An
        aborted turn, a state the trajectory cannot hold, or an env that raises ends the episode truncated. None: the
        env steps off the event loop (blocking, or an ``astep`` of its own), :meth:`_act_awaited` steps it.

        Not a coroutine: most envs step inline (what :meth:`Env.astep` does for a non-blocking env), and a coroutine
        made and awaited every turn was a frame and an object a turn for nothing (issue 46)."""
        snapshot_error = self._record_env_state() if self.options.record_env_states else None
        if snapshot_error is not None:
            # The turn is kept; the env is not stepped from a state the trajectory cannot hold.
            info: dict[str, Any] = {"error": snapshot_error}
            self._truncate("error", info)
            _warn_once(self.env_id, snapshot_error)
            return "", 0.0, False, True, info, None
        if finish_reason == "abort":
            # The backend gave up on this turn (request cancelled): keep the tokens, do not act on them.
            info = {}
            self._truncate("abort", info)
            return "", 0.0, False, True, info, None
        env = self.env
        try:
            if env.blocking or getattr(env.astep, "__func__", None) is not _ENV_ASTEP:  # its own astep, also on the instance
                return None
            return _env_outcome(env.step(action_text))
        except Exception as exc:  # noqa: BLE001 - a broken env step ends this episode, not the run
            return self._env_failed(exc)

    async def _act_awaited(self, action_text: str) -> _Outcome:
        """:meth:`_act` for an env stepped off the event loop (its ``astep``)."""
        try:
            return _env_outcome(await self.env.astep(action_text))
        except Exception as exc:  # noqa: BLE001 - a broken env step ends this episode, not the run
            return self._env_failed(exc)

    def _env_failed(self, exc: Exception) -> _Outcome:
        """A turn whose env step raised (or gave what no turn can hold): the episode ends truncated with the error."""
        info = {"error": f"{type(exc).__name__}: {exc}"}
        self._truncate("error", info)
        _warn_once(self.env_id, info["error"])
        return "", 0.0, False, True, info, None

    def _observation_turn(self, observation: str, action_text: str, images: Any, info: dict[str, Any]) -> tuple[bool, bool, tuple[int, ...], Sequence[int]]:
        """The next user (or tool) turn's tokens: ``(continues, truncated, observation_ids, rendered_turn)``;
        the turn limit, a template that cannot render the turn, or the token limit end the episode. (No list is made
        for a turn without images or rendered history: each was an allocation a turn, issue 46.)"""
        max_turns = self.options.max_turns
        if max_turns is not None and len(self._turn_spans) >= max_turns:
            return False, self._truncate("max_turns", info), (), ()
        role = str(info["observation_role"]) if "observation_role" in info else "user"  # "tool": ToolUse answered native calls
        try:
            if images:
                encoded = self._encode_images(images, info)
                observation_ids = self.chat_template.observation_delta(observation, role, len(encoded))
                if encoded:
                    observation_ids = tuple(self._place_images(list(observation_ids), encoded, turn=self.num_turns, offset=self._num_tokens))
            else:
                observation_ids = self.chat_template.observation_delta(observation, role)
            rendered_turn: Sequence[int] = () if self._rendered is None else self.chat_template.rendered_turn_ids(
                action_text, observation, role, self._rendered.window
            )
        except Exception as exc:  # noqa: BLE001 - a template that cannot render this turn ends the episode
            if images and self._image_config_error() is not None:  # the session's setup, not the env's turn: as start() does
                raise
            info["error"] = f"{type(exc).__name__}: {exc}"
            _warn_once(self.env_id, info["error"])
            return False, self._truncate("error", info), (), ()
        if self._token_limit is not None and (
            self._num_tokens + len(observation_ids) + 1 + len(self.chat_template.close_turn_ids()) > self._token_limit
        ):
            return False, self._truncate("max_total_tokens", info), (), ()
        return True, False, observation_ids, rendered_turn

    def _end(self, observation: str, terminated: bool, truncated: bool) -> None:
        """Close the episode on its last observation (its ids are not appended: no turn follows). The observation is
        kept last in ``_observations``, where :meth:`trajectory` takes it apart again: an episode that a step ended
        always has one (one attribute less a session, see the class's note)."""
        self._images = [i for i in self._images if i.start < self._num_tokens]  # a turn's images go with its ids
        self._observations.append(observation)
        self._terminated = self._terminated or terminated
        self._truncated = self._truncated or truncated

    def _record_env_state(self) -> str | None:
        """Snapshot the env before this turn's action; the error text if it cannot be snapshotted.

        A trajectory holds one state per turn or none, so a failed snapshot drops the episode's states.
        """
        try:
            self._env_states.append(encode_env_state(self.env.get_state()))
        except Exception as exc:  # noqa: BLE001 - an env that cannot snapshot ends this episode, not the run
            self._env_states.clear()
            return f"get_state failed, so this episode keeps no env states: {type(exc).__name__}: {exc}"
        return None

    def trajectory(self) -> TokenTrajectory:
        """The episode so far (or finished) as a :class:`TokenTrajectory` (copies, safe to keep)."""
        loss_mask, logprobs, versions, num_sampled = self._token_columns()
        response = self._ids[self._prompt_len :]  # the pieces not flushed into the books' list follow it
        for piece in self._pending:
            response += piece
        ended = self.done and bool(self._turn_spans)  # then _end kept the last observation last (see there)
        episode_return = sum(self._rewards)
        format_errors = env_error_turns = 0
        for info in self._infos:  # one pass for both counts (this runs once per episode, for every episode)
            format_errors += 1 if info.get("format_error") else 0
            env_error_turns += "error" in info
        metrics = {
            "num_turns": len(self._turn_spans),
            "num_tokens": self._num_tokens,
            "num_sampled_tokens": num_sampled,
            "format_errors": format_errors,
            "success": episode_success(self._infos, episode_return, self._terminated),
            "episode_return": float(episode_return),
            "terminated": self._terminated,
            "truncated": self._truncated,
            "truncated_by": self._truncated_by,
            "env_error_turns": env_error_turns,
            "has_logprobs": None not in self._turn_logprobs,  # a turn sampled without them holds None
            "fork_turn": self.fork_turn,
        }
        # The books hold the trajectory's invariants turn by turn (tests/conftest.py checks each one a test builds).
        return TokenTrajectory._from_checked_parts({  # a fresh dict: it becomes the trajectory's __dict__
            "prompt_ids": self._ids[: self._prompt_len],
            "response_ids": response,
            "loss_mask": loss_mask,
            "logprobs": logprobs,
            "turn_spans": list(self._turn_spans),
            "rewards": list(self._rewards),
            "terminated": self._terminated,
            "truncated": self._truncated,
            "env_id": self.env_id,
            "seed": self.seed,
            "observations": self._observations[:-1] if ended else list(self._observations),
            "actions": list(self._actions),
            "infos": [dict(i) for i in self._infos],
            "metrics": metrics,
            "final_observation": self._observations[-1] if ended else None,
            "history": self.history,
            "rendered_ids": None if self._rendered is None else list(self._rendered.ids),
            "rendered_context_ends": [] if self._rendered is None else list(self._rendered.context_ends),
            "generation_prompt_ids": list(self.chat_template.generation_prompt_ids) if self._rendered is not None else [],
            "images": list(self._images),
            "env_states": list(self._env_states),
            # Only an episode that a versioned policy played records versions (others keep their records small).
            "token_versions": versions,
        })

    def _token_columns(self) -> tuple[list[int], list[float], list[int], int]:
        """``(loss_mask, logprobs, token_versions, num_sampled)`` aligned to the response, from the per-turn books:
        1, the turn's log-probs and versions on each turn's span; 0, 0.0 and -1 on env and template tokens.
        ``token_versions`` is [] unless some sampled token carries a version; ``num_sampled`` counts the span tokens."""
        n = self._num_tokens - self._prompt_len
        loss_mask, logprobs = [0] * n, [0.0] * n
        num_sampled = 0
        for (start, end), lps in zip(self._turn_spans, self._turn_logprobs, strict=True):
            loss_mask[start:end] = [1] * (end - start)
            num_sampled += end - start
            if lps is not None:
                logprobs[start:end] = lps
        versions: list[int] = []
        if any(self._turn_versions) and any(tags and max(tags) >= 0 for tags in self._turn_versions):
            versions = [-1] * n
            for (start, end), tags in zip(self._turn_spans, self._turn_versions, strict=False):  # shorter: the rest are None
                if tags is not None:
                    versions[start:end] = tags
        return loss_mask, logprobs, versions, num_sampled

    # -- lifecycle ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the env (its tools, servers and processes). Safe to call twice."""
        env, self.env = self.env, None
        if env is not None:
            env.close()

    async def __aenter__(self) -> EpisodeSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- helpers --------------------------------------------------------------------------------

    def _encode_action(self, action_text: str, finish_reason: str) -> tuple[tuple[int, ...], str]:
        """The ids of an action given as text (a framework without ids), and the text the env gets: the end-of-turn ids
        added after a stop, unless the text kept its stop string (vLLM's ``include_stop_str_in_output``, special tokens
        not skipped): then the turn is closed once, not twice, and the env gets the text without it."""
        ids = tuple(self.tokenizer.encode(action_text, add_special_tokens=False))
        if _ends_turn(ids, self.chat_template.end_of_turn_ids):
            return ids, action_text.removesuffix(self.chat_template.end_of_turn_text)
        if finish_reason == "stop":
            ids += tuple(self.chat_template.end_of_turn_ids)
        return ids, action_text

    def _encode_images(self, images: Sequence[Any] | None, info: dict[str, Any]) -> list[tuple[Any, tuple[int, int, int], int]]:
        """Pixel inputs of the images an env put in ``info["images"]`` (taken out of the info by the caller:
        the trajectory keeps pixels, not PIL objects; ``info["num_images"]`` says how many there were)."""
        if images is None or (isinstance(images, (list, tuple)) and not images):
            return []
        problem = self._image_config_error()
        if problem is not None:
            raise InvalidArgument(problem)
        assert self.image_encoder is not None
        if not isinstance(images, (list, tuple)):
            raise InvalidArgument(f"info['images'] is a {type(images).__name__}; an env shows images as a list of PIL images or arrays.")
        for index, image in enumerate(images):
            if not _is_image(image):
                raise InvalidArgument(f"info['images'][{index}] is a {type(image).__name__}; an env shows images as a list of PIL images or arrays.")
        try:
            encoded = self.image_encoder.encode(images)
        except Exception as error:  # noqa: BLE001 - the processor's own error names neither the info key nor the image
            failed = next((i for i, image in enumerate(images) if not _encodes(self.image_encoder, image)), None)
            which = "info['images']" if failed is None else f"info['images'][{failed}] (size {_image_size(images[failed])})"
            raise InvalidArgument(f"The processor cannot encode {which}: {type(error).__name__}: {error}") from None
        info["num_images"] = len(encoded)
        return encoded

    def _image_config_error(self) -> str | None:
        """Why this session cannot show images at all (its tokenizer or history mode), or None."""
        if self.image_encoder is None:
            return (
                f"The env {self.env_id or type(self.env).__name__} shows images, but the session was given a tokenizer; "
                "pass the vision model's processor (e.g. AutoProcessor.from_pretrained(...)) where the tokenizer goes."
            )
        if self.history == "as_rendered":
            return "history='as_rendered' does not support image observations yet; use history='as_sampled'."
        return None

    def _place_images(self, ids: list[int], encoded: list, *, turn: int, offset: int) -> list[int]:
        """Widen the placeholders of a turn's ids and record where each image starts in the episode."""
        assert self.image_encoder is not None
        ids, starts = self.image_encoder.expand(ids, encoded)
        for (pixels, grid, count), start in zip(encoded, starts, strict=True):
            self._images.append(TrajectoryImage(turn=turn, start=offset + start, num_tokens=count, grid_thw=grid, pixel_values=pixels))
        return ids

    def _truncate(self, reason: str, info: dict[str, Any] | None = None) -> bool:
        self._truncated = True
        self._truncated_by = self._truncated_by or reason
        if info is not None:
            info["truncated_by"] = reason
        return True
