"""The base of every error GEM raises on purpose, so a caller can catch GEM's errors apart from others.

Each error also keeps the built-in base that says what kind of failure it is (``LabelError`` is a
``ValueError``, ``UnknownEnvError`` a ``KeyError``, ``RemoteEnvError`` a ``ConnectionError``), so code
that catches those goes on working. Like gymnasium's ``gymnasium.error``: :class:`GemError` is its
``Error``, :class:`DependencyNotInstalled` its ``DependencyNotInstalled``, :class:`ResetNeeded` its
``ResetNeeded``.

The generic errors are defined here; a module whose mistakes a caller may want to catch apart defines
its own beside the code that raises it (its docstring says when). The whole tree, by built-in base
(``tests/core/test_user_errors.py`` keeps this list complete)::

    GemError
    ├── DependencyNotInstalled (ImportError)       here; adapters.framework_version.FrameworkVersionError under it,
    │                                              and under that each adapter's: TRLVersionError, VerlVersionError,
    │                                              OpenRLHFVersionError, RL2VersionError, OatVersionError
    ├── InvalidArgument (ValueError)               here; MalformedFile under it; adapters.trl.recipe.options.InvalidRecipeArgument
    ├── ValueError kind, per module                rows.label.LabelError (EnvKwargsError), rows.mixture.MixtureError,
    │                                              curriculum.task.TaskError (curriculum.sampler.SamplerStateError),
    │                                              eval.resume.ResumeMismatch, judge.verdict.VerdictError,
    │                                              rollout.chat_template.ChatTemplateError,
    │                                              rollout.async_engine.AsyncRolloutConfigError, envs.swe.pack.SweError,
    │                                              serve.asgi.RequestError, agent.episode.MessageError,
    │                                              transport.http_limits.ResponseTooLarge / UnsupportedEncoding,
    │                                              interop.skyrl.SkyRLTaskError, adapters.oat.actor.BosTokenError,
    │                                              adapters.verl.reward_extra_info.RewardExtraKeysError,
    │                                              gem.envs.code_env.DatasetSplitError, gem.envs.game_env.fifteen_puzzle.InitAlgoError,
    │                                              gem.envs.multiagent.multi_agent_env.MultiAgentError
    ├── InvalidArgumentType (TypeError)            here; rollout.runner.EpisodeArgumentError, gem.tools.mcp_tool.UnsupportedMCPOptionError
    ├── UnknownKey (KeyError)                      here; registry.UnknownEnvError, interop.verifiers.UnknownVerifiersModule
    ├── UsageError (RuntimeError)                  here; ResetNeeded under it
    ├── RuntimeError kind, per module              StartFailed (here), registry.EnvUnavailableError,
    │                                              envs.dataset.DatasetUnavailableError, tools.sandbox.config.SandboxUnavailableError,
    │                                              eval.openai_client.EndpointError, agent.episode.EpisodeOver,
    │                                              rollout.policy_version.UpdateInProgress, rollout.async_engine.AsyncRolloutOrderError,
    │                                              rollout.async_engine.EnvStartError,
    │                                              serve.sessions.SessionLimitError, serve.weight_stream.WeightStreamError,
    │                                              interop.skyrl.SkyRLEnvUnavailable, interop.verifiers.VerifiersUnavailable,
    │                                              interop.verifiers_relay.RelayError
    ├── MissingFile (FileNotFoundError)            here; envs.swe.pack.PackNotBuiltError is its own
    ├── other built-ins                            serve.remote.RemoteEnvError (ConnectionError), eval.episode_log.ReportWriteError
    │                                              (OSError), judge.cache.CacheUnusable (OSError),
    │                                              rollout.trajectory_io.UnsafeKeyFile (PermissionError),
    │                                              envs.swe.pack.PackNotBuiltError (FileNotFoundError),
    │                                              interop.verifiers.VerifiersUnsupported (NotImplementedError),
    │                                              gem.vector.vector_env.EnvsNotInProcessError (AttributeError)
    └── GemError only                              transport.http_call.CallFailed, rollout.policy_version.GenerationInterrupted,
                                                   envs.retail.env.ToolError

Module paths are under ``gem_core`` unless they start with ``adapters`` (``gem_adapters``) or ``gem``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable

__all__ = [
    "GemError",
    "DependencyNotInstalled",
    "InvalidArgument",
    "InvalidArgumentType",
    "MalformedFile",
    "MissingFile",
    "UnknownKey",
    "UsageError",
    "ResetNeeded",
    "StartFailed",
    "causes",
    "did_you_mean",
    "refuse_unknown_keywords",
]


class GemError(Exception):
    """An error GEM raises on purpose; its message names the cause and the fix."""


class DependencyNotInstalled(GemError, ImportError):
    """An optional dependency (an extra, a framework) is missing or unusable; the message gives the
    install line (e.g. ``pip install -e ".[vision]"``)."""


class InvalidArgument(GemError, ValueError):
    """An argument, option, config key or value is malformed or out of range; the message names it and what
    to give instead. The generic one: a module with a more specific error (``LabelError``, ``TaskError``) raises that."""


class MalformedFile(InvalidArgument):
    """A file the user gave (a trajectory JSONL, a gem eval run or report, a key file) is malformed, damaged
    or of another format; the message names the file (and line) and what wrote the right kind."""


class MissingFile(GemError, FileNotFoundError):
    """A file or folder the user named (a local data file, a work directory) does not exist; the message
    names the path."""


class InvalidArgumentType(GemError, TypeError):
    """An argument has the wrong type, or a call got a keyword it does not take; the message names it and the
    type or keywords accepted."""


class UnknownKey(GemError, KeyError):
    """A name looked up in a fixed table (a setting, a wrapper, a shipped file, a field) is not in it; the
    message lists the known ones."""


class UsageError(GemError, RuntimeError):
    """A method was called when it cannot run: on a closed object, out of turn, from the wrong place; the
    message says what to call first or instead."""


class ResetNeeded(UsageError):
    """``step`` was called before ``reset`` or after the episode ended (gymnasium's ``ResetNeeded``)."""


class StartFailed(GemError, RuntimeError):
    """A worker, actor or server did not start (in time); the message names the limit or resource to change."""


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what lies under it: its causes, contexts and the members of exception groups (httpx, anyio
    and the MCP SDK wrap a refused connect or an oversized answer in two or three layers, one of them an
    ExceptionGroup), each once, at most 50 (a chain can be long, and may loop)."""
    found: list[BaseException] = []
    stack = [exc]
    while stack and len(found) < 50:
        current = stack.pop()
        if any(current is seen for seen in found):
            continue
        found.append(current)
        stack.extend(e for e in (*getattr(current, "exceptions", ()), current.__context__, current.__cause__) if e is not None)
    return found


def refuse_unknown_keywords(cls: type, keywords: Iterable[str]) -> None:
    """Refuse a keyword that is not an option of dataclass ``cls``, naming the closest option and every one.

    Called from the dataclass's ``__new__``: its own ``__init__`` refuses a misspelt keyword before
    ``__post_init__`` runs, with a bare TypeError that names neither the fix nor the options.

    Raises:
        InvalidArgumentType: a keyword names no field of ``cls``, or a field set by ``cls`` itself (an output).
    """
    fields = dataclasses.fields(cls)
    takes = [f.name for f in fields if f.init]
    for name in keywords:
        if name not in takes:
            why = " (an output, not an option)" if any(f.name == name for f in fields) else did_you_mean(name, takes)
            raise InvalidArgumentType(f"{cls.__name__} got an unexpected keyword {name!r}{why}; it takes {', '.join(takes)}.")


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the one of ``choices`` closest to a misspelt ``name``, or ``""``: what an error for
    an unknown key or option adds before listing every choice."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
