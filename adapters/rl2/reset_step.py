"""GEM episodes behind rl-square 0.0.2's env hook: ``async reset(extra_info)`` and ``async step(state, action, extra_info)``.

rl-square's rollout loop (``RL2.workers.rollout.Rollout.rollout``) keeps the tokens itself: the
SGLang output ids of each action, and for the next state the encoded text that extends
``state + action``. :class:`ResetStepEnv` keeps the episode in the core's
:class:`~gem_core.rollout.EpisodeSession` and answers with a ``next_state`` that extends the
previous one by the chat template's delta, so RL2 keeps one sequence per episode with each turn's
reward on that turn's last action token.

The hook passes text only, so the session encodes the action text (for its own books and budget);
the trained tokens are RL2's. rl-square stops after ``rollout.max_turns`` (default 1): set it at
least as high as the env's turn limit.
"""

from __future__ import annotations

from typing import Any

from gem_adapters.rl2.episodes import OpenEpisodes
from gem_core.errors import ResetNeeded
from gem_core.protocols import Tokenizer

__all__ = ["ResetStepEnv"]

_EPISODE_KEY = "gem_episode"


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

        Raises:
            LabelError: ``extra_info`` has no GEM label, or the label is not JSON, lacks ``env_id`` or ``seed``, or
                names an unknown env.
        """
        key, _, prompt_ids = await self.episodes.start({"extra_info": extra_info}, self.tokenizer)
        return self.tokenizer.decode(prompt_ids, skip_special_tokens=False), {**extra_info, _EPISODE_KEY: key}

    async def step(self, state: str, action: str, extra_info: dict[str, Any]) -> dict[str, Any]:
        """One turn: ``reward``, ``score`` (the same), ``done``, ``next_state`` (= state + action + delta) and ``extra_info``.

        Raises:
            ResetNeeded: ``extra_info`` names no open episode: it ended (its last step returned ``done``), was never
                returned by :meth:`reset`, or was closed because more than ``max_open_episodes`` were open.
        """
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
        feedback = self.tokenizer.decode(session.context_ids[before + end - start :], skip_special_tokens=False)
        if result.done:
            await self.episodes.close(key, ended=True)
        return {
            "reward": result.reward,
            "score": result.reward,
            "done": result.done,
            "next_state": state + action + feedback,
            "extra_info": extra_info,
        }
