"""Token deltas from a tokenizer's own chat template, so history is never decoded and re-encoded.

A multi-turn episode is one growing token sequence: the prompt, then per turn the tokens the policy
sampled and the tokens of the env's answer. Decoding the sampled tokens and re-rendering the chat
each turn would (1) produce different ids than the model sampled wherever BPE merges differently
across a turn boundary (re-tokenization drift: training becomes off-policy), and (2) cost O(T^2).

:class:`ChatTemplate` instead renders small message lists with placeholders once, when it is built,
and learns from the differences:

- ``end_of_turn_ids``: the (added) token the template puts right after an assistant message;
- where the sampled tokens go: right after the generation prompt (the history may render an assistant
  turn with another header, e.g. without Qwen3's empty ``<think></think>``; then
  :attr:`ChatTemplate.rewrites_history` is True);
- that the text after end-of-turn (e.g. ``"\\n"`` after ``<|im_end|>``) plus a user turn plus the
  generation prompt does not depend on how many turns came before.

Each turn then costs one render of a constant-size message list and one encode of the new text
(:meth:`ChatTemplate.observation_ids`), whatever the turn index. A template that breaks these
assumptions is refused with a :class:`ChatTemplateError` that says which one failed.

Templates that rewrite earlier assistant turns are supported: Qwen3-style templates drop the
``<think>`` block of every assistant turn before the last user message (and render the history without
the generation prompt's ``<think>\\n\\n</think>\\n\\n`` or ``<think>\\n``), Mistral- and Llama-3.1-style
templates ``trim`` the content. The trajectory keeps the tokens the policy actually sampled. Two
history modes say what the policy sees at the next turn (:data:`HISTORY_MODES`):

- ``"as_sampled"`` (default): the growing sequence itself, one training sequence per episode;
- ``"as_rendered"``: the conversation as the template renders it (earlier thinking stripped), what the
  model sees at inference behind a chat API. Earlier turns are then re-rendered once each (constant
  cost per turn), contexts stop being prefixes of the sampled sequence, and the episode is delivered per
  turn (:meth:`~gem_core.rollout.trajectory.TokenTrajectory.as_transitions`). Each context must extend
  the one before (one rendered sequence per episode), so a turn whose message makes the template render
  an earlier turn differently is refused (:class:`RenderedWindow`): Qwen3 keeps the thinking of turns that
  tool results follow and drops it once a user query follows, so a Qwen3 thinking episode that goes from
  tool results back to a user turn ends there (truncated, ``info["error"]`` says why); play it
  ``"as_sampled"``.

Two more guarantees:

- Time-dependent template globals are frozen once per :class:`ChatTemplate` (one run): a template that
  reads ``strftime_now`` (Llama-3.2's ``date_string``) gets ``date_string`` fixed at probe time, so an
  episode that crosses midnight renders the same system block. A mismatch found later (another
  nondeterministic global) raises :class:`ChatTemplateError` and evicts this template from the
  :meth:`ChatTemplate.for_tokenizer` cache, so the next episode re-probes.
- Env text is data: special tokens spelled in an observation (``<|im_end|>`` in a tool output) are
  encoded as plain text (``split_special_tokens``), while the template's glue keeps its control ids.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gem_core.errors import GemError
from gem_core.protocols import Tokenizer

__all__ = ["HISTORY_MODES", "ChatTemplate", "ChatTemplateError", "RenderedWindow"]

HISTORY_MODES = ("as_sampled", "as_rendered")
"""What the policy sees of earlier turns: the sampled ids ("as_sampled") or the template's rendering ("as_rendered")."""

#: Observation deltas kept per template, those used least lately out first (``_LRU``): repeated env messages ("Invalid
#: move", "The number is lower than 52.") cost a lookup instead of an encode (65 us for 43 characters with
#: DeepSeek's 128k BPE, three times a GuessTheNumber step).
_DELTA_CACHE_SIZE = 4096
#: First prompts kept per template (the same env variant opens every episode with the same text).
_INITIAL_CACHE_SIZE = 1024
#: Decoded actions kept per template (short actions repeat: ``\\boxed{50}``); only those of at most
#: :data:`_DECODE_CACHE_MAX_IDS` ids, so a key stays cheap to hash.
_DECODE_CACHE_SIZE = 4096
_DECODE_CACHE_MAX_IDS = 64
#: Texts longer than this are encoded every time: a long tool output rarely repeats, and a bounded count of
#: short entries keeps the caches' memory small (4096 x 2k characters at most).
_CACHED_TEXT_LIMIT = 2048

# Placeholders chosen to survive any template filter (no surrounding whitespace, no markup).
_USER_A, _USER_B, _USER_C = "GEMPROBEUSERAAA", "GEMPROBEUSERBBB", "GEMPROBEUSERCCC"
_ASSISTANT_X, _ASSISTANT_Y = "GEMPROBEASSISTANTXXX", "GEMPROBEASSISTANTYYY"
_THINKING = "<think>GEMPROBETHINKING</think>"


class ChatTemplateError(GemError, ValueError):
    """The tokenizer's chat template cannot be extended turn by turn without re-rendering history."""


@dataclass
class RenderedWindow:
    """``"as_rendered"``: the turns of one episode whose rendering a later message could still change.

    Each turn is rendered once, when its observation arrives. Most templates never render that turn
    differently later, but Qwen3 does: it keeps the thinking of assistant turns that tool results follow
    (a ``tool`` message, or a user message that is exactly a ``<tool_response>`` wrapper) and drops it
    once a user query follows. Such turns stay here, each new turn is rendered after them, and a turn
    that would change them is refused: the new context would no longer extend the one the policy saw.
    Plain data (no template inside), so a forked session copies it cheaply.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    """The open turns' assistant and observation messages."""
    text: str = ""
    """Their text as rendered when each arrived."""


class _IdObjects(dict):
    """Token id -> the one int object the template's caches use for it; a copy or a pickle starts empty, as the
    caches do."""

    def __reduce__(self) -> tuple:
        return (_IdObjects, ())


class _LRU:
    """A bounded map that keeps what was used lately, shared by every episode of a run (thread-safe: sessions step
    in worker threads too). A copy or a pickle starts empty: it is a cache, never state.

    Two generations of at most ``size // 2`` entries each: a hit in the current one is one dict lookup; a hit in the
    previous one is put in the current one; a put into a full current generation makes it the previous one and drops
    the old previous one. So at most ``size`` entries are kept, and a key used since the last ``size // 2`` puts
    (misses and moves) is always kept. An exact LRU moved every hit to the end (a pop and a re-insert, the key hashed
    twice): ~2% of a session turn with hundreds of episodes in flight, where the hot entries are hit every turn
    (issue 46).

    A caller on a hot path reads :attr:`current` first (``cache.current.get(key)``: a dict lookup, no Python call,
    where a session turn made two calls of :meth:`get`) and :meth:`get` on a miss there.
    """

    def __init__(self, size: int):
        self.size = size
        self._generation = max(1, size // 2)
        self.current: dict[Any, Any] = {}
        """The newer generation, read without the lock as :meth:`get` reads it (a put adds to it, or starts a new one)."""
        self._previous: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        # No lock on a read: each dict call is atomic under the GIL; a key that a put moves between generations
        # meanwhile may be a miss for this reader (it recomputes the same value), never a wrong value.
        value = self.current.get(key)
        if value is None:
            value = self._previous.get(key)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            if key not in self.current and len(self.current) >= self._generation:
                self._previous, self.current = self.current, {}
            self.current[key] = value

    def clear(self) -> None:
        with self._lock:
            self.current, self._previous = {}, {}

    def __len__(self) -> int:
        """Distinct keys kept."""
        return len(self.current.keys() | self._previous.keys())

    def __reduce__(self) -> tuple:
        return (_LRU, (self.size,))


def _snippet(text: str, limit: int = 160) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


class ChatTemplate:
    """Token deltas from the tokenizer's own chat template; earlier ids are never re-encoded.

    Args:
        tokenizer: a ``transformers`` tokenizer with a chat template.
        system_prompt: a system message placed before the first user turn (None: the template's
            default, if it has one).
        chat_template_kwargs: extra variables for the template (e.g. ``{"enable_thinking": False}``),
            the same dict a trainer passes to ``apply_chat_template`` (TRL's ``chat_template_kwargs``,
            verl's ``apply_chat_template_kwargs``).

    Raises:
        ChatTemplateError: the template cannot be extended turn by turn; the message says why.
    """

    end_of_turn_ids: list[int]
    """What the assistant emits to end its turn (e.g. ``[<|im_end|>]``)."""
    generation_prompt_ids: list[int]
    """The ids the generation prompt adds (e.g. ``<|im_start|>assistant\n``); [] if none."""
    rewrites_history: bool
    """True if rendering a longer conversation shows earlier assistant turns otherwise than sampled: it
    drops thinking, renders a header other than the generation prompt, or trims the content."""

    def __init__(self, tokenizer: Tokenizer, *, system_prompt: str | None = None, chat_template_kwargs: dict | None = None):
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError(
                "The tokenizer has no chat template; set `tokenizer.chat_template` to the model's Jinja template "
                "(gem_core.testing.CHAT_TEMPLATES has examples)."
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.frozen_at = datetime.now()
        """When the time-dependent globals were frozen (see the module docstring)."""
        if "strftime_now" in str(tokenizer.chat_template):
            # Llama-3.2: `{% if not date_string is defined %}{% set date_string = strftime_now(...) %}`.
            self.chat_template_kwargs.setdefault("date_string", self.frozen_at.strftime("%d %b %Y"))
        self._cache_slot: tuple[dict, tuple] | None = None
        # The tokenizers backend encodes without transformers' per-call overhead (a third of a delta's cost).
        self._backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
        self._deltas = _LRU(_DELTA_CACHE_SIZE)  # (role, observation, images) -> delta ids (a tuple)
        self._initials = _LRU(_INITIAL_CACHE_SIZE)  # (observation, images) -> first prompt ids (a tuple)
        self._decoded = _LRU(_DECODE_CACHE_SIZE)  # action content ids (a tuple) -> text
        self._id_objects = _IdObjects()  # one int object per token id for the ids the caches hold (see _interned)
        added = [t for t in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).values() if str(t.content)]
        # Env text is data: no added token spelled in it becomes its id (DeepSeek's <｜User｜> is added but
        # not special). Model text keeps its non-special added tokens (Qwen's <tool_call>), loses the special ones.
        self._controls = _alternation(str(t.content) for t in added)
        self._special_controls = _alternation(str(t.content) for t in added if getattr(t, "special", False))
        self._probe()

    # Cache of probed templates, one per (tokenizer, template, system prompt, kwargs): probing renders
    # a few conversations, and every episode of a run shares the result.
    _cache: dict[int, tuple[weakref.ref, dict[tuple, ChatTemplate]]] = {}
    _cache_lock = threading.Lock()

    @classmethod
    def for_tokenizer(
        cls, tokenizer: Tokenizer, *, system_prompt: str | None = None, chat_template_kwargs: dict | None = None
    ) -> ChatTemplate:
        """A shared :class:`ChatTemplate` for ``tokenizer`` (probed once, then reused)."""
        key = (str(tokenizer.chat_template), system_prompt, repr(sorted((chat_template_kwargs or {}).items())))
        with cls._cache_lock:
            entry = cls._cache.get(id(tokenizer))
            if entry is None or entry[0]() is not tokenizer:
                entry = (weakref.ref(tokenizer), {})
                cls._cache[id(tokenizer)] = entry
            per_tokenizer = entry[1]
            if key not in per_tokenizer:
                template = cls(tokenizer, system_prompt=system_prompt, chat_template_kwargs=chat_template_kwargs)
                template._cache_slot = (per_tokenizer, key)
                per_tokenizer[key] = template
            return per_tokenizer[key]

    def _evict(self) -> None:
        """Drop this template from the shared cache: what it learned no longer holds (see module docstring)."""
        if self._cache_slot is not None:
            per_tokenizer, key = self._cache_slot
            with self._cache_lock:
                if per_tokenizer.get(key) is self:
                    del per_tokenizer[key]

    # -- public deltas -------------------------------------------------------------------------

    def initial_ids(self, observation: str, images: int = 0) -> list[int]:
        """[system] + user(observation) + generation prompt: the episode's prompt ids.

        With ``images`` > 0 the user message holds that many ``{"type": "image"}`` items before the text,
        each rendered by the template as its vision markers with one image placeholder id
        (:class:`gem_core.rollout.vision.ImageEncoder` widens them to the processor's count).
        """
        cached = self._initials.current.get((observation, images)) or self._initials.get((observation, images))
        if cached is not None:  # a delta depends on nothing but its arguments and the (frozen) template
            return list(cached)
        ids = self._initial_ids(observation, images)
        if len(observation) <= _CACHED_TEXT_LIMIT:
            self._initials.put((observation, images), self._interned(ids))
        return ids

    def _initial_ids(self, observation: str, images: int) -> list[int]:
        messages = [*self._base(), _user(observation, images)]
        text = self._render_images(messages, generation_prompt=True) if images else self._render(messages, generation_prompt=True)
        parts = self._first_turn_parts
        if images and _found(self._controls, observation):
            parts = _around(self._render_images([*self._base(), _user(_USER_A, images)], generation_prompt=True), _USER_A)
        return self._encode_env_text(text, observation, parts, mid=False)

    def observation_ids(self, observation: str, role: str = "user", images: int = 0) -> list[int]:
        """The ids to append after a finished assistant turn (one that ends with :attr:`end_of_turn_ids`).

        They are the text the template puts after end-of-turn, one ``role`` message holding
        ``observation`` (``"tool"`` for native tool results, rendered as the family's tool role), and the
        generation prompt. Costs one render of a four-message conversation, whatever the turn. Special
        tokens spelled in ``observation`` are encoded as plain text. ``images`` as in :meth:`initial_ids`.

        Raises:
            ChatTemplateError: the template rendered earlier turns differently this time (a
                nondeterministic global); this template is evicted from the shared cache.
        """
        return list(self.observation_delta(observation, role, images))

    def observation_delta(self, observation: str, role: str = "user", images: int = 0) -> tuple[int, ...]:
        """:meth:`observation_ids` as an immutable tuple, for a caller that keeps the ids as they are: a repeated
        observation's is the template's own cached tuple, shared and not copied (each episode's books hold its turns'
        deltas, issue 46).

        Raises:
            ChatTemplateError: as :meth:`observation_ids`.
        """
        cached = self._deltas.current.get((role, observation, images)) or self._deltas.get((role, observation, images))
        if cached is not None:  # envs repeat observations ("Invalid move ..."); a delta depends on nothing else
            return cached
        glue_parts = self._glue_parts if role == "user" else self._role_glue(role)
        history = [*self._base(), _user(_USER_A), _assistant(_ASSISTANT_X)]
        if images:
            text = self._render_images([*history, _message(role, observation, images)], generation_prompt=True)
            if _found(self._controls, observation):
                rendered = self._render_images([*history, _message(role, _USER_B, images)], generation_prompt=True)
                glue_parts = _around(rendered[len(self._through_first_turn) :], _USER_B)
        else:
            text = self._render([*history, _message(role, observation)], generation_prompt=True)
        if not text.startswith(self._through_first_turn):
            self._evict()
            raise ChatTemplateError(
                f"The chat template renders the earlier turns differently when the user message is {_snippet(observation)} "
                "(a time-dependent or random template global?); the observation cannot be appended without re-rendering "
                "history. The template was dropped from the cache and is probed again for the next episode."
            )
        ids = self._encode_env_text(text[len(self._through_first_turn) :], observation, glue_parts, mid=True)
        if len(observation) > _CACHED_TEXT_LIMIT:
            return tuple(ids)
        delta = self._interned(ids)
        self._deltas.put((role, observation, images), delta)
        return delta

    def decode_action(self, content_ids: Sequence[int]) -> str:
        """The text of an assistant turn's ids (its end-of-turn ids left out): ``tokenizer.decode(...,
        skip_special_tokens=True)``, what the env is given; short actions are remembered."""
        if len(content_ids) > _DECODE_CACHE_MAX_IDS:
            return self.tokenizer.decode(content_ids, skip_special_tokens=True)
        key = tuple(content_ids)
        text = self._decoded.current.get(key) or self._decoded.get(key)
        if text is None:
            text = self.tokenizer.decode(content_ids, skip_special_tokens=True)
            self._decoded.put(key, text)
        return text

    def rendered_prompt_ids(self, observation: str) -> list[int]:
        """``"as_rendered"`` history: [system] + user(observation), without the generation prompt.

        Raises:
            ChatTemplateError: the template's pieces do not join into its own tokenization (plain-text cuts that BPE
                merges across, see :meth:`_check_rendered_joins`); the message says to use ``history="as_sampled"``.
        """
        text = self._render([*self._base(), _user(observation)], generation_prompt=False)
        self._check_rendered_joins(self._first_turn_plain_parts[1])
        return self._encode_env_text(text, observation, self._first_turn_plain_parts, mid=False)

    def rendered_turn_ids(
        self, action_text: str, observation: str, role: str = "user", window: RenderedWindow | None = None
    ) -> list[int]:
        """``"as_rendered"`` history: one finished turn as the template shows it later (the assistant
        message, thinking dropped or content trimmed as the template does, then the ``role`` message),
        without the generation prompt. Appended to :meth:`rendered_prompt_ids` and earlier turns.

        The turn is rendered after a placeholder first turn (constant cost). ``window`` (one per episode)
        holds the earlier turns whose rendering a later user message could still change; the turn is
        rendered after them as well and refused if it changes them (see :class:`RenderedWindow`).

        Raises:
            ChatTemplateError: the template renders an earlier turn differently once this message
                follows it (Qwen3 and thinking kept before a tool result), or the turn cannot be cut
                out of the template's rendering, or its pieces do not join into the template's tokenization
                (as :meth:`rendered_prompt_ids`).
        """
        after = (self._glue_parts if role == "user" else self._role_glue(role))[1]
        self._check_rendered_joins(after[: len(after) - len(self._generation_prompt)] if after.endswith(self._generation_prompt) else after)
        text, ids = self._rendered_turn(action_text, observation, role)
        if window is None:
            return ids
        messages = [_assistant(action_text), _message(role, observation)]
        if window.messages:
            together = self._render_after_first_turn([*window.messages, *messages])
            if together != window.text + text:
                before, now = window.text + text, together
                at = next((i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a != b), min(len(before), len(now)))
                changed = "the earlier turns" if at < len(window.text) else "this turn"
                raise ChatTemplateError(
                    f"history='as_rendered' cannot show this turn: the chat template renders {changed} differently once a "
                    f"{role!r} message follows the {len(window.messages) // 2} turn(s) it kept open "
                    f"({_snippet(before[max(0, at - 40):])} became {_snippet(now[max(0, at - 40):])}); Qwen3 keeps the thinking of "
                    "turns that tool results follow and drops it once a user query follows. The next context would not "
                    "extend the one the policy saw. Play episodes that mix tool results and user turns with "
                    "history='as_sampled' for this template."
                )
        probe = self._render_after_first_turn([*window.messages, *messages, _assistant(_ASSISTANT_Y), _user(_USER_C)])
        if probe.startswith(window.text + text):  # a later user query leaves these turns as they are
            window.messages, window.text = [], ""
        else:
            window.messages, window.text = [*window.messages, *messages], window.text + text
        return ids

    def _check_rendered_joins(self, after: str) -> None:
        """Refuse ``"as_rendered"`` where its separately encoded pieces would not join into the template's tokenization.

        A context is the rendered prompt, the rendered turns and the generation prompt, each encoded on its own
        (each turn once, see :meth:`rendered_turn_ids`). Where a piece ends in a turn's text plus ``after`` and the next
        starts with the history header (or is the generation prompt) in plain text, BPE may merge across the cut
        ("number." + "\\n\\nAssistant:" is '.', 'ĊĊ' apart but '.ĊĊ' joined: Human/Assistant-style templates); a cut
        at an added token never does. Probed once per ``after`` on sample texts either side of the cut.

        Raises:
            ChatTemplateError: a sample encodes differently split at the cut than joined.
        """
        if after not in self._rendered_joins:
            self._rendered_joins[after] = self._rendered_join_problem(after)
        problem = self._rendered_joins[after]
        if problem is not None:
            raise ChatTemplateError(problem)

    def _rendered_join_problem(self, after: str) -> str | None:
        lefts = ("Guess the number.", "Higher.", "5", "ok!", "why?", "a:", "(x)", "end ", "done\n", "x", '"q"', "1.5")
        rights = [self._history_header + a for a in ("5", "Sure.", " ok", "\nx", "<think>")]
        rights += [self._generation_prompt] if self._generation_prompt else []
        for left in lefts:
            for right in rights:
                joined = self._encode_mid(left + after + right)
                split = self._encode_mid(left + after) + self._encode_mid(right)
                if joined != split:
                    tokens = self.tokenizer.convert_ids_to_tokens
                    return (
                        "history='as_rendered' cannot use this chat template: it encodes the rendered turns and the "
                        "generation prompt separately, and where they meet in plain text the tokenizer merges across the "
                        f"cut ({_snippet(left + after + right)}: {tokens(split)[-8:]} split vs {tokens(joined)[-8:]} joined), "
                        "so the contexts would not be the template's tokenization. Use history='as_sampled' with this "
                        "template, or a template whose turns and generation prompt start with an added token."
                    )
        return None

    def _render_after_first_turn(self, messages: list[dict[str, Any]]) -> str:
        """The rendering of ``messages`` after a placeholder first user turn, without the generation prompt."""
        text = self._render([*self._base(), _user(_USER_A), *messages], generation_prompt=False)
        if not text.startswith(self._first_turn_plain):
            self._evict()
            raise ChatTemplateError("The chat template renders the first user turn differently once an assistant turn follows.")
        return text[len(self._first_turn_plain) :]

    def _rendered_turn(self, action_text: str, observation: str, role: str) -> tuple[str, list[int]]:
        """(text, ids) of one turn rendered after a placeholder first turn (see :meth:`rendered_turn_ids`)."""
        text = self._render_after_first_turn([_assistant(action_text), _message(role, observation)])
        if not (_found(self._special_controls, action_text) or _found(self._controls, observation)):
            return text, self._encode_mid(text)
        # Forged control tokens in the action or the observation: find both contents and encode them as text.
        with_placeholder = self._render_after_first_turn([_assistant(action_text), _message(role, _USER_B)])
        cut = with_placeholder.find(_USER_B)
        head, tail = with_placeholder[:cut], with_placeholder[cut + len(_USER_B) :]
        if not text.endswith(tail):
            raise ChatTemplateError("Could not locate the observation in the chat template's rendering of a turn.")
        if not text.startswith(head):
            # The observation changed how the assistant turn before it renders (Qwen3 keeps the thinking
            # before a user message that is exactly a <tool_response> wrapper): it ends the text instead.
            body = text[: len(text) - len(tail)]
            shown = next((c for c in (observation, observation.strip()) if body.endswith(c)), None)
            if shown is None:
                raise ChatTemplateError("Could not locate the observation in the chat template's rendering of a turn.")
            head = body[: len(body) - len(shown)]
        head_glue, head_text = self._split_assistant(head, role)
        middle = text[len(head) : len(text) - len(tail)]
        ids = (
            self._encode_mid(head_glue[0]) + self._encode_plain(head_text, keep_added=True) + self._encode_mid(head_glue[1])
            + self._encode_plain(middle) + self._encode_mid(tail)
        )
        return text, ids

    def close_turn_ids(self) -> list[int]:
        """Tokens that close an assistant turn cut by the length limit (appended with loss mask 0)."""
        return list(self.end_of_turn_ids)

    @property
    def end_of_turn_text(self) -> str:
        """The text the template writes after an assistant turn's content (the end-of-turn glue)."""
        return self._end_text

    def encode_rendering(self, text: str, messages: Sequence[dict[str, Any]] = ()) -> list[int]:
        """Ids of ``text``, a rendering by this template that holds ``messages``' contents in order, with each content
        encoded as data: a special token spelled in a content stays plain text, as env text does in a trajectory
        (model text keeps non-special added tokens, env text does not). Only the template's own glue carries control ids.

        Without a control token spelled in any content (the common case) this is one encode of ``text``, identical to
        tokenizing the rendering.

        Raises:
            ChatTemplateError: a content that spells a control token is not in ``text`` after the content before it, or
                repeats the template's glue where rendering the messages on their own cannot place it.
        """
        risky = [m for m in messages if _found(self._controls, m["content"])]
        if not risky:
            return self._encode(text)
        ids: list[int] = []
        position = 0
        for message, at in zip(risky, self._content_offsets(text, messages, risky), strict=True):
            ids += (self._encode_mid if position else self._encode)(text[position:at])
            ids += self._encode_plain(message["content"], keep_added=message["role"] == "assistant", mid=at > 0)
            position = at + len(message["content"])
        return ids + self._encode_mid(text[position:])

    def _content_offsets(self, text: str, messages: Sequence[dict[str, Any]], risky: list[dict[str, Any]]) -> list[int]:
        """Where each ``risky`` content starts in ``text``, by structure: a content that repeats the template's glue
        ("<|im_start|>user\\n" in a tool output) also matches inside the glue, and a wrong match would make the forged
        token a control id and the template's own one text.

        The earliest and the latest placement in order are found; where they agree for every content the placement is
        the only one. Otherwise the template renders ``messages`` again with a placeholder per risky content (after a
        placeholder turn ending in end-of-turn, as ``text`` from an agent call's delta does, or alone, as a full
        prompt), and the placeholders' places are used if substituting the contents gives ``text`` back.
        """
        earliest, position = [], 0
        for message in risky:
            at = text.find(message["content"], position)
            if at < 0:
                raise ChatTemplateError("could not locate a message's content in the chat template's rendering")
            earliest.append(at)
            position = at + len(message["content"])
        latest, end = [], len(text)
        for message in reversed(risky):
            at = text.rfind(message["content"], 0, end)
            latest.append(at)
            end = at
        if earliest == latest[::-1]:
            return earliest
        placeholders = {id(m): f"GEMPROBECONTENT{i}QQQ" for i, m in enumerate(risky)}
        marked = [{**m, "content": placeholders[id(m)]} if id(m) in placeholders else m for m in messages]
        for prefix, cut in (([*self._base(), _user(_USER_A), _assistant(_ASSISTANT_X)], len(self._through_first_turn)), ([], 0)):
            try:
                rendered = self._render([*prefix, *marked], generation_prompt=True)[cut:]
            except Exception:  # noqa: BLE001 - a template that cannot render the messages alone gives no placement
                continue
            offsets, shift, rebuilt, position = [], 0, [], 0
            for message in risky:
                at = rendered.find(placeholders[id(message)], position)
                if at < 0:
                    break
                rebuilt.append(rendered[position:at] + message["content"])
                offsets.append(at + shift)
                shift += len(message["content"]) - len(placeholders[id(message)])
                position = at + len(placeholders[id(message)])
            if len(offsets) == len(risky) and "".join(rebuilt) + rendered[position:] == text:
                return offsets
        raise ChatTemplateError(
            "could not tell where a message's content is in the chat template's rendering: the content repeats the "
            "template's own glue and the template renders the messages differently on their own"
        )

    def ends_turn(self, action_ids: list[int]) -> bool:
        """Whether ``action_ids`` already end with :attr:`end_of_turn_ids`."""
        n = len(self.end_of_turn_ids)
        return len(action_ids) >= n and list(action_ids[-n:]) == self.end_of_turn_ids

    # -- encoding -------------------------------------------------------------------------------

    def _interned(self, ids: list[int]) -> tuple[int, ...]:
        """``ids`` as a tuple whose ints are this template's one object per token id.

        A tokenizer makes a new int object for every id it returns (above 256, Python's own small ints), so a
        thousand cached deltas hold tens of thousands of ints scattered in memory, and each turn's copy of a delta,
        and each episode's copy of its ids, touches them one cache line apiece. Shared, they are the few hundred
        the env's texts use, kept in the CPU's cache (issue 46: with 512 episodes in flight, cachegrind counted
        190 -> 123 misses of an L2-sized cache per turn, ``bench/session_cachegrind.py``). Bounded by the vocabulary.
        """
        objects = self._id_objects
        return tuple([objects.setdefault(i, i) for i in ids])

    def _encode(self, text: str) -> list[int]:
        backend = self._backend
        if backend is not None:
            if backend.encode_special_tokens:  # left on by an earlier split_special_tokens=True call
                backend.encode_special_tokens = False
            return backend.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _encode_mid(self, text: str) -> list[int]:
        """:meth:`_encode` of ``text`` where it sits mid-sequence, after an added token, as every piece but a prompt's
        first does. A sentencepiece-style tokenizer (Metaspace ``prepend_scheme="first"``: Mistral v0.3, Llama-2
        non-legacy) marks the document's start ("▁") and an added token with ``rstrip`` eats the whitespace after it,
        so such a piece encoded alone differs from the template's tokenization; it is encoded behind the end-of-turn
        token instead, whose id is dropped. Costs one encode (plus the anchor) and only for those tokenizers."""
        if not self._mid_differs or not text:
            return self._encode(text)
        ids = self._encode(self._end_text + text)
        n = len(self.end_of_turn_ids)
        return ids[n:] if ids[:n] == self.end_of_turn_ids else self._encode(text)

    def _encode_plain(self, text: str, *, keep_added: bool = False, mid: bool = True) -> list[int]:
        """Env or model text: special tokens spelled in it are encoded as the characters they are
        (``split_special_tokens``); for env text (``keep_added=False``) non-special added tokens too,
        by encoding the text in pieces cut one character into each occurrence. ``mid``: the text does not start
        the document (see :meth:`_encode_mid`)."""
        pieces = [text]
        if not keep_added and self._controls is not None:
            cuts = [m.start() + 1 for m in self._controls.finditer(text)]
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        return [t for i, piece in enumerate(pieces) for t in self._encode_plain_piece(piece, mid=mid or i > 0)]

    def _encode_plain_piece(self, piece: str, *, mid: bool) -> list[int]:
        def plain(text: str) -> list[int]:
            return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)]

        if not (mid and piece and self._mid_differs):
            return plain(piece)
        # split_special_tokens spells the end-of-turn token out too, so the anchor is plain text here: used where its
        # ids are a clean prefix of the joined encoding (no token across the cut), else the next one.
        for anchor in (self._end_text, "\n", "."):
            anchor_ids, joined = plain(anchor), plain(anchor + piece)
            if joined[: len(anchor_ids)] == anchor_ids:
                return joined[len(anchor_ids) :]
        return plain(piece)

    def _encode_env_text(self, text: str, content: str, parts: tuple[str, str], *, mid: bool) -> list[int]:
        """Encode ``text`` = before + (the template's rendering of ``content``) + after, the content as plain text;
        ``mid``: ``text`` follows the end-of-turn token (an observation delta), else it starts the document.

        Without a control token spelled in ``content`` (the common case) this is one encode of ``text``,
        identical to encoding the template's rendering; otherwise the glue is encoded with its control
        ids and the content with ``split_special_tokens``.
        """
        encode = self._encode_mid if mid else self._encode
        if not _found(self._controls, content):
            return encode(text)
        before, after = parts
        if not (text.startswith(before) and text.endswith(after)) or len(before) + len(after) > len(text):
            raise ChatTemplateError(f"Could not locate the env text in the chat template's rendering {_snippet(text)}.")
        content_text = text[len(before) : len(text) - len(after)]
        return encode(before) + self._encode_plain(content_text, mid=mid or bool(before)) + self._encode_mid(after)

    def _split_assistant(self, head: str, role: str) -> tuple[tuple[str, str], str]:
        """``head`` = history header + rendered action + end-of-turn glue: ((header, glue), action)."""
        parts = self._glue_parts if role == "user" else self._role_glue(role)
        header, glue = self._history_header, self._end_text + parts[0]
        if not (head.startswith(header) and head.endswith(glue)):
            raise ChatTemplateError("Could not locate the assistant message in the chat template's rendering of a turn.")
        return (header, glue), head[len(header) : len(head) - len(glue)]

    # -- probing --------------------------------------------------------------------------------

    def _base(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []

    def _render(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **self.chat_template_kwargs
        )

    def _render_images(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
        """:meth:`_render` for messages with image items: a template that cannot render them says so."""
        try:
            return self._render(messages, generation_prompt=generation_prompt)
        except Exception as exc:  # jinja: `'...' + message['content']` on a list
            raise ChatTemplateError(
                "The chat template cannot render a user turn with images (content as a list of {'type': 'image'} and "
                f"{{'type': 'text'}} items): {type(exc).__name__}: {exc}. Use the vision model's own chat template "
                "(its processor's), which renders image items as the model's vision markers."
            ) from exc

    def _probe(self) -> None:
        base = self._base()
        one = self._render([*base, _user(_USER_A)], generation_prompt=True)
        one_plain = self._render([*base, _user(_USER_A)], generation_prompt=False)
        if not one.startswith(one_plain):
            raise ChatTemplateError(
                "The chat template's generation prompt does not extend the conversation "
                f"({_snippet(one_plain)} vs {_snippet(one)})."
            )
        generation_prompt = one[len(one_plain) :]
        two = self._render([*base, _user(_USER_A), _assistant(_ASSISTANT_X), _user(_USER_B)], generation_prompt=True)
        at = two.find(_ASSISTANT_X)
        if at < 0 or not two.startswith(one_plain):
            raise ChatTemplateError(
                "The chat template is not prefix-stable: rendering [user, assistant, user] does not start with the "
                f"rendering of [user] ({_snippet(one_plain)} vs {_snippet(two)}), or drops the assistant message. "
                "Some templates move the system prompt to the last user turn (Mistral v0.3): then pass "
                "system_prompt=None and put the instructions in the env's first observation."
            )
        # How the history introduces an assistant message; the sampled tokens follow the generation prompt
        # instead. They differ for Qwen3 without thinking (empty think block only in the generation prompt),
        # Qwen3-2507 thinking (`<think>\n` only there) and Mistral (" " before the content, no prompt).
        self._history_header = two[len(one_plain) : at]
        after_content = two[at + len(_ASSISTANT_X) :]
        self.end_of_turn_ids, end_text = self._end_of_turn(after_content)
        self._through_first_turn = two[: at + len(_ASSISTANT_X)] + end_text
        glue_b = two[len(self._through_first_turn) :]
        if _USER_B not in glue_b or not glue_b.endswith(generation_prompt):
            raise ChatTemplateError(
                f"Could not find the user message and the generation prompt in the chat template's rendering {_snippet(two)}."
            )
        self._glue_parts = _around(glue_b, _USER_B)
        self._first_turn_parts = _around(one, _USER_A)
        self._first_turn_plain_parts = _around(one_plain, _USER_A)
        self._first_turn_plain = one_plain
        self._end_text = end_text
        self._generation_prompt = generation_prompt
        self._role_glues: dict[str, tuple[str, str]] = {}

        # The glue must not depend on the turn index: a third turn must extend the second verbatim.
        three = self._render(
            [*base, _user(_USER_A), _assistant(_ASSISTANT_X), _user(_USER_B), _assistant(_ASSISTANT_Y), _user(_USER_C)],
            generation_prompt=True,
        )
        two_plain = two[: len(two) - len(generation_prompt)]
        expected = two_plain + self._history_header + _ASSISTANT_Y + end_text + glue_b.replace(_USER_B, _USER_C)
        if three != expected:
            raise ChatTemplateError(
                "The chat template renders later turns differently from the second one (it depends on the turn index "
                f"or rewrites earlier turns without thinking): got {_snippet(three[len(two_plain):])}, expected "
                f"{_snippet(expected[len(two_plain):])}."
            )

        # Does a piece encode differently mid-sequence than alone (see _encode_mid)? Probed on the template's own texts.
        eot_ids = self.end_of_turn_ids
        self._mid_differs = any(
            self._encode(end_text + sample) != eot_ids + self._encode(sample)
            for sample in (generation_prompt, glue_b, self._history_header + _ASSISTANT_X, "Hello world.", " x", "\nx")
            if sample
        )
        self._rendered_joins: dict[str, str | None] = {}  # as_rendered: text after a turn's content -> why refused
        self.generation_prompt_ids = self._encode_mid(generation_prompt) if generation_prompt else []
        thinking = self._render(
            [*base, _user(_USER_A), _assistant(_THINKING + _ASSISTANT_X), _user(_USER_B)], generation_prompt=True
        )
        padded = self._render(
            [*base, _user(_USER_A), _assistant(f"  {_ASSISTANT_X}  "), _user(_USER_B)], generation_prompt=True
        )
        self.drops_thinking = _THINKING not in thinking
        """Earlier assistant turns lose their ``<think>`` block in the template's rendering."""
        self.trims_content = f"  {_ASSISTANT_X}  " not in padded
        """The template strips whitespace around assistant content (``| trim``)."""
        self.history_header_differs = self._history_header != generation_prompt
        """The history renders an assistant turn with another header than the generation prompt."""
        self.rewrites_history = self.drops_thinking or self.trims_content or self.history_header_differs

    def _role_glue(self, role: str) -> tuple[str, str]:
        """(before, after) the content of a ``role`` message that follows an assistant turn; probed once per role."""
        if role in self._role_glues:
            return self._role_glues[role]
        base = self._base()
        two = self._render([*base, _user(_USER_A), _assistant(_ASSISTANT_X), _message(role, _USER_B)], generation_prompt=True)
        three = self._render(
            [*base, _user(_USER_A), _assistant(_ASSISTANT_X), _message(role, _USER_B), _assistant(_ASSISTANT_Y), _message(role, _USER_C)],
            generation_prompt=True,
        )
        if not two.startswith(self._through_first_turn) or not two.endswith(self._generation_prompt):
            raise ChatTemplateError(
                f"The chat template renders a {role!r} message after an assistant turn in a way that changes the turn "
                f"before it ({_snippet(two)}); observations cannot be sent as {role!r} messages with this template."
            )
        glue = two[len(self._through_first_turn) :]
        two_plain = two[: len(two) - len(self._generation_prompt)]
        expected = two_plain + self._history_header + _ASSISTANT_Y + self._end_text + glue.replace(_USER_B, _USER_C)
        if three != expected:
            raise ChatTemplateError(
                f"The chat template renders later {role!r} messages differently from the first one: got "
                f"{_snippet(three[len(two_plain):])}, expected {_snippet(expected[len(two_plain):])}."
            )
        self._role_glues[role] = _around(glue, _USER_B)
        return self._role_glues[role]

    def _end_of_turn(self, after_content: str) -> tuple[list[int], str]:
        """The end-of-turn token: the added token that directly follows an assistant message."""
        ids = self._encode(after_content)
        added = getattr(self.tokenizer, "added_tokens_decoder", {}) or {}
        first = ids[0] if ids else None
        if first is None or first not in added or not after_content.startswith(str(added[first].content)):
            raise ChatTemplateError(
                "The chat template does not close an assistant message with a single added token (found "
                f"{_snippet(after_content)} after it). The session needs one to split turns at a token boundary; "
                "add the end-of-turn marker to the tokenizer as an added token."
            )
        return [int(first)], str(added[first].content)

    def __repr__(self) -> str:
        eot = self.tokenizer.convert_ids_to_tokens(self.end_of_turn_ids)
        return f"ChatTemplate(end_of_turn={eot}, system_prompt={self.system_prompt!r}, rewrites_history={self.rewrites_history})"


def _alternation(strings: Any) -> re.Pattern | None:
    """One regex matching any of ``strings`` (longest first), None if there are none."""
    unique = sorted(set(strings), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, unique))) if unique else None


def _found(pattern: re.Pattern | None, text: str) -> bool:
    return pattern is not None and pattern.search(text) is not None


def _around(text: str, placeholder: str) -> tuple[str, str]:
    """(before, after) the one occurrence of ``placeholder`` in ``text``."""
    at = text.find(placeholder)
    if at < 0:
        raise ChatTemplateError(f"The chat template drops a user message: {_snippet(text)}.")
    return text[:at], text[at + len(placeholder) :]


def _user(content: str, images: int = 0) -> dict[str, Any]:
    return _message("user", content, images)


def _assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def _message(role: str, content: str, images: int = 0) -> dict[str, Any]:
    if images:  # the images first, then the text: TRL's prepare_multimodal_messages and Qwen2-VL's examples
        return {"role": role, "content": [*({"type": "image"} for _ in range(images)), {"type": "text", "text": content}]}
    return {"role": role, "content": content}
