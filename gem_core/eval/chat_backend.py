"""Evaluate a model behind an OpenAI-compatible chat endpoint, with a text-level episode loop.

An HTTP chat API takes messages and returns text; the server applies its own chat template and
tokenizes the whole conversation again on every call. So this loop is *not* token-exact like
:class:`~gem_core.eval.policy_backend.PolicyBackend`: the model sees its earlier replies re-encoded
from text (a reply may tokenize differently than it was sampled, and templates that drop earlier
reasoning do so here too). For evaluation that is what a deployed model sees anyway; for training
data, use the token-level runner.

The loop reuses the env pieces of the core: the env's async ``areset``/``astep``; the turn limit is
the env's own, set by :func:`gem_core.make` (``max_turns``) as for every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gem_core.env import Env, episode_success
from gem_core.eval.openai_client import ChatEndpoint
from gem_core.eval.report import EpisodeRecord, step_error

if TYPE_CHECKING:
    from gem_core.eval.config import EvalConfig

__all__ = ["ChatBackend"]


class ChatBackend:
    """Runs episodes against a chat endpoint.

    Args:
        endpoint_factory: builds the :class:`ChatEndpoint` inside the running event loop (an
            ``httpx.AsyncClient`` belongs to the loop it was first used in).
        model_name: the name recorded in the report.
        settings: the endpoint's settings recorded in the report (base URL, sampling; never the API key).
    """

    kind = "openai-chat"

    def __init__(
        self, endpoint_factory: Callable[[], ChatEndpoint], *, model_name: str, settings: dict[str, Any] | None = None
    ):
        self._endpoint_factory = endpoint_factory
        self._endpoint: ChatEndpoint | None = None
        self.model_name = model_name
        #: Recorded in the report (never the API key).
        self.settings = dict(settings or {})

    @classmethod
    def from_url(cls, base_url: str, model: str, **endpoint_kwargs: Any) -> ChatBackend:
        """A backend for ``model`` served at ``base_url`` (see :class:`ChatEndpoint` for the options)."""
        settings = {"base_url": base_url, **{k: v for k, v in endpoint_kwargs.items() if k not in ("api_key", "transport")}}
        return cls(lambda: ChatEndpoint(base_url, model, **endpoint_kwargs), model_name=model, settings=settings)

    @property
    def endpoint(self) -> ChatEndpoint:
        """The HTTP chat endpoint, built on first use (so a backend that plays no episode opens no client)."""
        if self._endpoint is None:
            self._endpoint = self._endpoint_factory()
        return self._endpoint

    async def run_episode(self, env: Env, env_id: str, seed: int, config: EvalConfig, record: EpisodeRecord) -> None:
        """Play one episode; ``record`` is filled as the episode goes, so a failure keeps what was played."""
        observation, _ = await env.areset(seed=seed)
        messages = [{"role": "system", "content": config.system_prompt}] if config.system_prompt else []
        messages.append({"role": "user", "content": observation})
        record.transcript = messages
        last_info: dict = {}
        infos: list[dict] = []
        while True:
            reply = await self.endpoint.chat(
                messages,
                max_tokens=config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                top_k=config.top_k,
            )
            record.prompt_tokens += reply.prompt_tokens
            record.completion_tokens += reply.completion_tokens
            messages.append({"role": "assistant", "content": reply.text})
            observation, reward, terminated, truncated, last_info = await env.astep(reply.text)
            record.rewards.append(float(reward))
            infos.append(last_info)
            record.format_errors += bool(last_info.get("format_error"))
            messages.append({"role": "user", "content": observation})
            if terminated or truncated:
                record.terminated, record.truncated = bool(terminated), bool(truncated)
                break
        record.success = episode_success([last_info], record.episode_return, record.terminated)
        error = step_error(infos)  # a judge that gave no verdict: the episode failed, its 0 is no score
        if error:
            record.error = error

    async def aclose(self) -> None:
        """Close the endpoint's HTTP client, if one was opened."""
        if self._endpoint is not None:
            await self._endpoint.aclose()
            self._endpoint = None
