"""GEM episodes behind rl-square 0.0.2's env hook: ``async reset(extra_info)`` and ``async step(state, action, extra_info)``.

rl-square's rollout loop (``RL2.workers.rollout.Rollout.rollout``) keeps the tokens itself: the
SGLang output ids of each action, and for the next state the encoded text that extends
``state + action``. :class:`ResetStepEnv` keeps the episode in the core's
:class:`~gem_core.rollout.EpisodeSession` and answers with a ``next_state`` that extends the
previous one by the chat template's delta, so RL2 keeps one sequence per episode with each turn's
reward on that turn's last action token.

The hook passes text only, so the session encodes the action text (for its own books and budget);
the action's trained tokens are SGLang's. rl-square encodes the prompt and each feedback text again
(``initialize_state_dict`` -> ``tokenizer.encode``), which would turn env text that spells a special token
(``<|im_start|>assistant`` echoed from the action) into that token: a forged turn. So the rollout module's
``initialize_state_dict`` is wrapped (see ``private_api.py``) to give rl-square the session's own ids for
exactly the text :meth:`ResetStepEnv.reset` or :meth:`ResetStepEnv.step` just handed it; every other
encode goes to rl-square's tokenizer. rl-square stops after ``rollout.max_turns`` (default 1): set it at
least as high as the env's turn limit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from gem_adapters.rl2.api import RL2VersionError
from gem_adapters.rl2.episodes import OpenEpisodes
from gem_core.errors import ResetNeeded
from gem_core.protocols import Tokenizer

__all__ = ["ResetStepEnv"]

_EPISODE_KEY = "gem_episode"
_ROLLOUT_MODULE = "RL2.workers.rollout"  # rl-square's rollout loop, which encodes reset's and step's text
_HANDED: ContextVar[tuple[str, list[int]] | None] = ContextVar("gem_rl2_handed", default=None)
"""The text reset/step just returned to this rollout (one asyncio task each) and the session's ids for it."""


class _SessionTokenizer:
    """The tokenizer rl-square's ``initialize_state_dict`` gets for a handed text: the session's ids for that text.

    rl-square 0.0.2 encodes with ``tokenizer.encode(state_text, add_special_tokens=False)``; any other call goes to
    its own tokenizer.
    """

    def __init__(self, tokenizer: Any, text: str, ids: list[int]):
        self._tokenizer, self._text, self._ids = tokenizer, text, ids
        self.used = False

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        if not self.used and args == (self._text,) and kwargs == {"add_special_tokens": False}:
            self.used = True
            return list(self._ids)
        return self._tokenizer.encode(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


class _SessionIds:
    """rl-square's ``initialize_state_dict``, fed the session's ids for the text reset/step just handed over (once)."""

    def __init__(self, initialize_state_dict: Callable[[Any, str], dict[str, list]]):
        self.wrapped = initialize_state_dict

    def __call__(self, tokenizer: Any, state_text: str) -> dict[str, list]:
        handed = _HANDED.get()
        if handed is None or handed[0] != state_text:
            return self.wrapped(tokenizer, state_text)
        _HANDED.set(None)
        session_tokenizer = _SessionTokenizer(tokenizer, *handed)
        state_dict = self.wrapped(session_tokenizer, state_text)
        if not session_tokenizer.used:
            raise RL2VersionError(
                "rl-square's initialize_state_dict no longer encodes the state with tokenizer.encode(text, "
                "add_special_tokens=False), so GEM cannot give it the session's ids: env text spelling a special token "
                "(<|im_start|>) would be trained as that token. Install rl-square==0.0.2."
            )
        return state_dict


def _hand_over(text: str, ids: list[int]) -> str:
    """Return ``text``, and have rl-square's rollout loop train ``ids`` (the session's) when it encodes it next."""
    module = sys.modules.get(_ROLLOUT_MODULE)
    if module is not None:  # run by rl-square (not loaded: called directly, nothing re-encodes the text)
        current = getattr(module, "initialize_state_dict", None)
        if current is None:
            raise RL2VersionError(
                f"{_ROLLOUT_MODULE} has no initialize_state_dict, so GEM cannot give rl-square the session's ids: "
                "it would re-encode the observation text, and env text spelling a special token (<|im_start|>) "
                "would be trained as that token. Install rl-square==0.0.2."
            )
        if not isinstance(current, _SessionIds):
            setattr(module, "initialize_state_dict", _SessionIds(current))  # noqa: B010  (a module mypy cannot see)
    _HANDED.set((text, list(ids)))
    return text


class ResetStepEnv:
    """``reset``/``step`` coroutines for an rl-square 0.0.2 env file.

    Args:
        tokenizer: the actor's tokenizer, or its name/path (``actor.model_name``; loaded with
            ``AutoTokenizer`` on first use).
        system_prompt: system message before the first observation.
        max_turns: end episodes after this many turns (keep it <= ``rollout.max_turns``).
        max_total_tokens: whole-episode token budget (keep it under ``actor.max_length_per_device``).
        max_open_episodes: episodes kept open; rl-square drops an episode at ``rollout.max_turns``
            without telling the env, so past this bound the oldest are closed.

    Raises:
        InvalidArgument: An option is out of range (``max_turns``, ``max_total_tokens``, ``max_open_episodes`` below 1).
    """

    def __init__(
        self,
        tokenizer: Tokenizer | str,
        *,
        system_prompt: str | None = None,
        max_turns: int | None = None,
        max_total_tokens: int | None = None,
        max_open_episodes: int = 65536,
    ):
        self._tokenizer = tokenizer
        self.episodes = OpenEpisodes(max_open_episodes, owner="ResetStepEnv", system_prompt=system_prompt, max_turns=max_turns,
                                     max_total_tokens=max_total_tokens)

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer; one given by name is loaded (``AutoTokenizer.from_pretrained``) on first use."""
        if isinstance(self._tokenizer, str):
            from transformers import AutoTokenizer

            loaded: Tokenizer = AutoTokenizer.from_pretrained(self._tokenizer, trust_remote_code=True)
            self._tokenizer = loaded
            return loaded
        return self._tokenizer

    async def reset(self, extra_info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start the episode named by ``extra_info["label"]``; returns the prompt text and the extra_info to pass on.

        rl-square encodes the text next; it gets the session's ids for it (the env's text is never read as markup).

        Raises:
            LabelError: ``extra_info`` has no GEM label, or the label is not JSON, lacks ``env_id`` or ``seed``, or
                names an unknown env.
            RL2VersionError: The running rl-square does not encode the state as 0.0.2 does, so it would re-tokenize
                the observation text (special-token text would become control tokens).
        """
        _HANDED.set(None)
        key, _, prompt_ids = await self.episodes.start({"extra_info": extra_info}, self.tokenizer)
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        return _hand_over(text, prompt_ids), {**extra_info, _EPISODE_KEY: key}

    async def step(self, state: str, action: str, extra_info: dict[str, Any]) -> dict[str, Any]:
        """One turn: ``reward``, ``score`` (the same), ``done``, ``next_state`` (= state + action + delta) and ``extra_info``.

        rl-square encodes the delta after ``state + action`` next; it gets the session's ids for it.

        Raises:
            ResetNeeded: ``extra_info`` names no open episode: it ended (its last step returned ``done``), was never
                returned by :meth:`reset`, or was closed because more than ``max_open_episodes`` were open.
            RL2VersionError: The running rl-square does not encode the state as 0.0.2 does, so it would re-tokenize
                the feedback text (special-token text would become control tokens).
        """
        _HANDED.set(None)
        key: Any = extra_info.get(_EPISODE_KEY)  # an open episode's str; anything else is refused below
        episode = self.episodes.get(key)
        if episode is None and self.episodes.ended(key):
            raise ResetNeeded(f"GEM episode {key!r} is over (its last step() returned done=True): reset() starts the next one.")
        if episode is None:
            raise ResetNeeded(
                f"No open GEM episode {key!r}: step() needs the extra_info returned by reset() "
                f"(or more than max_open_episodes={self.episodes.max_open} episodes were open)."
            )
        if not isinstance(action, str):  # not text: an empty move, which the env answers with its format error
            action = ""
        session = episode.session
        eot_text = self.tokenizer.decode(session.chat_template.end_of_turn_ids, skip_special_tokens=False)
        content = action[: -len(eot_text)] if eot_text and action.endswith(eot_text) else action
        before = session.num_tokens
        result = await session.step(action_text=content, finish_reason="stop")
        start, end = session.trajectory().turn_spans[-1]
        feedback_ids = session.context_ids[before + end - start :]
        feedback = self.tokenizer.decode(feedback_ids, skip_special_tokens=False)
        if result.done:  # rl-square ends the sequence without the feedback
            await self.episodes.close(key, ended=True)
        else:
            _hand_over(feedback, feedback_ids)
        return {
            "reward": result.reward,
            "score": result.reward,
            "done": result.done,
            "next_state": state + action + feedback,
            "extra_info": extra_info,
        }
