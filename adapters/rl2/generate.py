"""GEM episodes behind RL2 main's env hook: ``async generate(config, tokenizer, router_url, sample)``.

RL2 (main, from source) imports ``rollout.env_path`` and awaits ``generate`` once per sample; the
results live in the ``RL2.datasets.Sample`` it passes. :class:`GenerateEnv` runs the episode with
the core's :class:`~gem_core.rollout.EpisodeSession`: each turn it POSTs the session's context ids
to the SGLang router (``/generate``, token ids in and out, logprobs on), steps the session with the
exact sampled ids, and writes the session's books into the sample in RL2's layout (one sequence:
``states``, ``actions``, ``action_mask``, ``logps``, ``rewards`` with each turn's reward on its last
action token). Nothing is decoded and re-encoded.

Partial rollout is supported: on ``finish_reason == "abort"`` the sampled ids are kept, the sample
is marked ABORTED, and the next call continues the same turn.

Curriculum (``GenerateEnv(curriculum=<sampler spec>)``, :mod:`gem_core.curriculum`): RL2's dataloader has no
sampler hook, but RL2 gathers ``generate`` over the ``responses_per_prompt`` copies of a row (deep copies
of it), so the env file chooses the start: the first copy of a row draws, the other copies share the draw,
and every finished episode updates the sampler (one per process: RL2 rolls out on rank 0). Only calls with
``rollout.train`` draw (RL2 main passes ``rollout.train`` or ``rollout.test``; only the first has
``partial_rollout``), so test rows keep their labels. Every episode's ``gem/task/<task>/success`` and
``/return`` and the sampler's ``gem/curriculum/<task>/probability`` go into ``sample.metrics``, which RL2
averages per key and logs. What RL2 leaves no hook for: the sampler's state is not in RL2's checkpoints
(``state_dir`` keeps ``gem_task_sampler.json`` up to date and is read back when the run starts again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gem_adapters.rl2.api import row_label
from gem_adapters.rl2.episodes import OpenEpisodes
from gem_core.curriculum import shared_group_starts, task_metrics
from gem_core.errors import InvalidArgument
from gem_core.protocols import Tokenizer
from gem_core.rollout import EpisodeSession
from gem_core.rollout.options import check_episode_options
from gem_core.rollout.policy import default_stop_token_ids

__all__ = ["GenerateEnv"]

_EPISODE_KEY = "gem_episode"

def _plain(config_node: Any) -> dict[str, Any]:
    if isinstance(config_node, dict):
        return dict(config_node)
    from omegaconf import OmegaConf

    return OmegaConf.to_container(config_node, resolve=True)


async def _post_generate(router_url: str, payload: dict[str, Any]) -> dict[str, Any]:
    """RL2's own request helper (shared session, retries) when RL2 main is installed, else plain aiohttp."""
    try:
        from RL2.utils.communication import async_request
    except ImportError:
        async_request = None
    if async_request is not None:
        return await async_request(router_url, "generate", json=payload)
    import aiohttp

    async with aiohttp.ClientSession() as http, http.post(f"{router_url}/generate", json=payload) as response:
        response.raise_for_status()
        return await response.json(content_type=None)


class GenerateEnv:
    """A ``generate`` coroutine for an RL2 (main) env file.

    Args:
        system_prompt: system message before the first observation.
        max_turns: end episodes after this many turns (RL2 main has no turn cap of its own).
        max_total_tokens: whole-episode token budget; keep it under ``actor.max_length_per_device``.
        max_open_episodes: aborted episodes kept for RL2 to continue; past this bound the oldest are closed.
        curriculum: a task sampler spec (:func:`gem_core.curriculum.shared_group_starts`: ``tasks``, TaskSampler's
            arguments, ``state_dir``): training episodes start where it draws, one draw per row for its
            ``responses_per_prompt`` copies. None: every episode starts at its row's label.

    Raises:
        InvalidArgument: An option is out of range (``max_turns``, ``max_total_tokens``, ``max_open_episodes`` below 1).
    """

    def __init__(self, *, system_prompt: str | None = None, max_turns: int | None = None, max_total_tokens: int | None = None,
                 max_open_episodes: int = 65536, curriculum: Mapping[str, Any] | None = None):
        self.episodes = OpenEpisodes(max_open_episodes, owner="GenerateEnv", system_prompt=system_prompt, max_turns=max_turns,
                                     max_total_tokens=max_total_tokens)
        self.curriculum = curriculum

    def _starts(self, config: Any) -> Any:
        """Where episodes start: the curriculum's draws for ``rollout.train`` (the config with ``partial_rollout``), else the rows."""
        train, copies = "partial_rollout" in config, config.get("responses_per_prompt")
        copies = 1 if copies is None else copies  # unset: 1
        check_episode_options(f"GenerateEnv: rollout.{'train' if train else 'test'}", responses_per_prompt=copies)
        return shared_group_starts(self.curriculum if train else None, copies)

    async def generate(self, config: Any, tokenizer: Tokenizer, router_url: str, sample: Any) -> None:
        """Play the sample's episode until it ends or the router aborts a turn; RL2 awaits this per sample.

        A first call starts the episode the row's label names (or a curriculum's draw); a call after an abort
        continues the turn in flight. The results go into ``sample`` (nothing is returned): its ``state_dict``
        in RL2's per-token layout, its texts, ``status`` (DONE, or ABORTED to be called again) and ``metrics``.

        Args:
            config: RL2's ``rollout.train`` or ``rollout.test`` config (``sampling_params``, ``responses_per_prompt``).
            tokenizer: The policy's tokenizer.
            router_url: The SGLang router's address; each turn POSTs token ids to its ``/generate``.
            sample: RL2's ``Sample``; a sample already DONE is left as it is.

        Raises:
            InvalidArgument: ``sampling_params.max_new_tokens`` is not set (RL2 defaults it to null) or not a whole
                number >= 1.
            LabelError: The row has no GEM label, or it does not name a registered env with a seed.
        """
        status = type(sample).Status
        if sample.status == status.DONE:
            return
        sampling_params = _plain(config.sampling_params)
        max_new_tokens = sampling_params.get("max_new_tokens")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            found = "is not set (RL2 defaults it to null)" if max_new_tokens in (None, 0) else f"is {max_new_tokens!r:.40}, not a whole number >= 1"
            raise InvalidArgument(
                f"rollout.train.sampling_params.max_new_tokens {found}; "
                "set it to the per-turn token cap, e.g. rollout.train.sampling_params.max_new_tokens=512."
            )
        if sample.status == status.ABORTED:
            sample.status = status.RUNNING
        key = sample.sample.get(_EPISODE_KEY)
        episode = self.episodes.get(key)
        if episode is None:  # the row's copies share a key (their content) and so a curriculum's draw
            label = await self._starts(config).start(json.dumps(sample.sample, sort_keys=True, default=str), row_label(sample.sample))
            key, episode, prompt_ids = await self.episodes.start(sample.sample, tokenizer, label)
            sample.sample[_EPISODE_KEY] = key
            sample.state_text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
            self._write_books(sample, episode.session)
        session = episode.session
        stop_ids = sampling_params.pop("stop_token_ids", None) or default_stop_token_ids(tokenizer, session.chat_template)

        while True:
            # The turn's room (its cap and the episode's token bounds) less what an aborted request already sampled.
            budget = session.generation_budget(max_new_tokens) - len(episode.pending_ids)
            finish = "length"  # the pending ids fill the room: the turn is cut there, nothing more to ask for
            if budget > 0:
                response = await _post_generate(
                    router_url,
                    {
                        "input_ids": session.context_ids + episode.pending_ids,
                        "sampling_params": {**sampling_params, "max_new_tokens": budget, "stop_token_ids": stop_ids, "no_stop_trim": True},
                        "return_logprob": True,
                    },
                )
                meta = response["meta_info"]
                triples = meta.get("output_token_logprobs") or []
                episode.pending_ids += [int(t[1]) for t in triples]
                episode.pending_logps += [float(t[0]) for t in triples]
                finish = meta["finish_reason"]["type"]
                if finish == "abort":
                    sample.status = status.ABORTED
                    return
            ids, logps = episode.pending_ids, episode.pending_logps
            episode.pending_ids, episode.pending_logps = [], []
            context_before = session.context_ids
            await session.step(ids, logprobs=logps, finish_reason="length" if finish == "length" else "stop")
            self._write_books(sample, session)
            sample.state_text = tokenizer.decode(context_before, skip_special_tokens=False)
            sample.action_text = tokenizer.decode(ids, skip_special_tokens=False)
            sample.metrics["response_length"].append(len(ids))
            sample.metrics["length_clip_ratio"].append(finish == "length")
            if session.done:
                trajectory = session.trajectory()
                sample.state_dicts.append(sample.state_dict)
                sample.metrics["turns"].append(trajectory.num_turns)
                sample.metrics["rewards"].append(trajectory.episode_return)
                sample.metrics["env_error_turns"].append(trajectory.metrics["env_error_turns"])
                sample.metrics["truncated"].append(trajectory.truncated)
                starts = self._starts(config)
                await starts.finish(session.label, trajectory)  # tags the task, updates a sampler
                logged = {**task_metrics([trajectory]), **await starts.metrics()}  # RL2 averages each key over its samples
                for name, value in logged.items():
                    if not name.endswith("/episodes"):
                        sample.metrics[name].append(value)
                sample.status = status.DONE
                await self.episodes.close(key)
                return

    @staticmethod
    def _write_books(sample: Any, session: EpisodeSession) -> None:
        """The session's sequence in RL2's per-token layout (the same sequence keeps growing)."""
        trajectory = session.trajectory()
        n_prompt = len(trajectory.prompt_ids)
        response_actions = [t if m else 0 for t, m in zip(trajectory.response_ids, trajectory.loss_mask, strict=True)]
        sample.state_dict = {
            "states": trajectory.prompt_ids + trajectory.response_ids,
            "actions": [0] * n_prompt + response_actions,
            "action_mask": [0] * n_prompt + list(trajectory.loss_mask),
            "logps": [0.0] * n_prompt + list(trajectory.logprobs),
            "rewards": [0.0] * n_prompt + list(trajectory.token_rewards),
        }
        sample.turn = trajectory.num_turns
