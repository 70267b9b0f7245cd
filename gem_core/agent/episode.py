"""One agent episode as token trajectories: each chat call an agent makes is stitched onto the calls before it.

An agent program owns its loop and sends its whole message list on every call. Re-rendering that list and
encoding it each time would train on re-tokenized history, not on what the policy sampled. Instead each
call is matched against the conversations of the earlier calls (their messages plus the reply the agent
got back):

- **extends**: the call's messages are an earlier call's messages, then that call's reply, then new
  messages (tool results, a user turn). Its prompt is that call's prompt, the tokens the policy sampled,
  and the template's delta for the new messages (what the template puts after the end-of-turn token, up to
  the generation prompt). The prompt ids of every call are thus exactly the earlier ids plus new ids.
- **forks**: anything else (the agent dropped, summarised or edited earlier messages, changed its tools,
  or resent a call). The call starts a new branch from the template's rendering of its messages; the
  branch's metrics say which branch it shares the most messages with, after how many messages, and why
  it could not extend (the TRL message protocol's rule: a rewritten history starts a new sample).

Each branch becomes one :class:`~gem_core.rollout.trajectory.TokenTrajectory` (loss mask 1 exactly on
sampled tokens). Message contents are data: a special token spelled in a tool result or user message is
encoded as plain text, as :class:`~gem_core.rollout.chat_template.ChatTemplate` does for env text. A lone
surrogate (valid JSON, ``"\\ud800"``: text an agent cut mid-pair or decoded with ``surrogateescape``) has no UTF-8
and no tokenizer encodes it: it is encoded as U+FFFD, as :mod:`gem_core.agent.program` hands task text over, rather
than refused, since every later call of the agent repeats it in its history. The recorded messages keep it, so the
agent's next call still matches them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gem_core.errors import GemError
from gem_core.protocols import Tokenizer
from gem_core.rollout.chat_template import ChatTemplate, ChatTemplateError
from gem_core.rollout.options import check_episode_options
from gem_core.rollout.policy import Generation
from gem_core.rollout.trajectory import TokenTrajectory

__all__ = ["AgentCall", "AgentEpisode", "Branch", "EpisodeOver", "MessageError", "normalize_messages"]

#: The ``tools`` of a ``/v1/completions`` branch (chat calls never extend it).
_COMPLETION = ("completions",)
_ROLES = ("system", "developer", "user", "assistant", "tool")
_SURROGATE = re.compile("[\ud800-\udfff]")


class MessageError(GemError, ValueError):
    """A chat request's messages are malformed (answered with HTTP 400)."""


class EpisodeOver(GemError, RuntimeError):
    """A call arrived after its episode ended (turn limit, time limit, or closed by its owner)."""


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: only text parts are supported
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise MessageError(f"{where}: only text content parts ({{'type': 'text', 'text': ...}}) are supported")
            texts.append(part["text"])
        return "".join(texts)
    raise MessageError(f"{where}: 'content' must be a string, a list of text parts, or null")


def _tool_calls(raw: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise MessageError(f"{where}: 'tool_calls' must be a list")
    out = []
    for j, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MessageError(f"{where}.tool_calls[{j}]: expected {{'type': 'function', 'function': {{'name': ..., 'arguments': ...}}}}")
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, str):  # OpenAI sends a JSON string; templates expect an object
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                raise MessageError(f"{where}.tool_calls[{j}]: 'arguments' is not valid JSON") from None
        out.append({"id": str(call.get("id", "")), "type": "function", "function": {"name": function["name"], "arguments": arguments}})
    return out


def normalize_messages(raw: Any) -> list[dict[str, Any]]:
    """The request's ``messages`` as the chat template renders them: role, text content, tool calls, tool call id.

    Raises:
        MessageError: not a non-empty list of messages with a known role and text content.
    """
    if not isinstance(raw, list) or not raw:
        raise MessageError("'messages' must be a non-empty list of {'role': ..., 'content': ...} objects")
    out = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise MessageError(f"{where}: expected an object whose 'role' is one of {', '.join(_ROLES)}")
        role = "system" if message["role"] == "developer" else message["role"]
        clean: dict[str, Any] = {"role": role, "content": _content_text(message.get("content"), where)}
        if role == "assistant" and message.get("tool_calls"):
            clean["tool_calls"] = _tool_calls(message["tool_calls"], where)
        if role == "tool" and message.get("tool_call_id") is not None:
            clean["tool_call_id"] = str(message["tool_call_id"])
        if role == "tool" and isinstance(message.get("name"), str):
            clean["name"] = message["name"]
        out.append(clean)
    return out


def _same_reply(sent: dict[str, Any], reply: dict[str, Any]) -> bool:
    """Whether the assistant message an agent sent back is the reply it got (ids aside: some clients renumber)."""
    if sent.get("role") != "assistant" or sent.get("content", "") != reply.get("content", ""):
        return False
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in sent.get("tool_calls", [])]
    return calls == [(c["function"]["name"], c["function"]["arguments"]) for c in reply.get("tool_calls", [])]


@dataclass
class AgentCall:
    """One chat call of an episode."""

    index: int
    branch: int
    messages: list[dict[str, Any]]
    """The call's messages (normalized)."""
    prompt_ids: list[int]
    """Exactly the ids the policy was given."""
    generation: Generation | None = None
    reply: dict[str, Any] | None = None
    """The assistant message returned (role, content, tool_calls)."""
    text_before: str = ""
    """A completion branch's text before this call (restored if the policy fails)."""
    rollback: int = 0
    """Length of the branch's response ids before this call (undone to it if the policy fails)."""
    max_new_tokens: int | None = None
    """Tokens this call may sample: what the episode's ``max_response_tokens`` leaves on its branch (None: no cap)."""


@dataclass
class Branch:
    """One growing token sequence: the calls that extend each other."""

    prompt_ids: list[int]
    tools: Any
    parent: int | None = None
    forked_at_call: int | None = None
    shared_messages: int = 0
    fork_reason: str | None = None
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    conversation: list[dict[str, Any]] = field(default_factory=list)
    """The last call's messages plus its reply: what the next call must start with to extend."""
    text: str = ""
    """A completion branch: its prompt and completions as text (what a text prompt must start with to extend)."""
    busy: bool = False
    """A call on this branch is being sampled; a second call cannot extend it until it is recorded."""
    missing_logprobs: bool = False
    """A call's policy gave no log-probs (recorded as 0.0; the trajectory's ``metrics["has_logprobs"]`` says so)."""

    def ids(self) -> list[int]:
        """The whole sequence: prompt then response ids."""
        return self.prompt_ids + self.response_ids


class AgentEpisode:
    """The calls of one agent episode, stitched into branches of token ids (see the module docstring).

    Not thread-safe: the endpoint serves one episode's calls on one event loop, under the episode's lock.

    Args:
        key: the episode's key (its API key and URL path segment).
        tokenizer: the policy's tokenizer, with its chat template.
        chat_template_kwargs: extra template variables (e.g. ``{"enable_thinking": False}``).
        max_turns: calls allowed; the one after is refused and ends the episode truncated (None: no limit).
        max_response_tokens: most response ids (sampled and template) one branch may hold, as a trainer's
            completion length: each call samples at most what is left, and a call that leaves nothing to
            sample is refused and ends the episode truncated (None: no limit).

    Raises:
        InvalidArgument: if ``max_turns`` or ``max_response_tokens`` is not a positive whole number or None.
    """

    def __init__(
        self, key: str, tokenizer: Tokenizer, *, chat_template_kwargs: dict | None = None, max_turns: int | None = None,
        max_response_tokens: int | None = None,
    ):
        self.key = key
        self.tokenizer = tokenizer
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.template = ChatTemplate.for_tokenizer(tokenizer, chat_template_kwargs=chat_template_kwargs)
        # Checked here, not at the first call: there a text or a float was an HTTP 500 for every call of the episode.
        check_episode_options("AgentEpisode", max_turns=max_turns, max_response_tokens=max_response_tokens)
        self.max_turns = max_turns
        self.max_response_tokens = max_response_tokens
        self.calls: list[AgentCall] = []
        self.branches: list[Branch] = []
        self.ended: str | None = None
        """Why the episode ended (None while it runs)."""
        self.pending: list[AgentCall] = []
        """Calls begun and not yet finished (being sampled)."""
        self.truncated = False

    # -- rendering -----------------------------------------------------------------------------

    def _render(self, messages: list[dict[str, Any]], tools: Any, *, generation_prompt: bool) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt, **self.chat_template_kwargs
            )
        except Exception as error:  # jinja raises on what the template cannot render (a role, tool calls)
            raise MessageError(f"the model's chat template cannot render these messages: {type(error).__name__}: {error}") from None

    def _encode(self, text: str, messages: list[dict[str, Any]]) -> list[int]:
        """``text`` (a rendering that holds ``messages``' contents in order) encoded with the contents as data."""
        if _SURROGATE.search(text):  # see the module docstring
            text = _SURROGATE.sub("\ufffd", text)
            messages = [{**message, "content": _SURROGATE.sub("\ufffd", message["content"])} for message in messages]
        try:
            return self.template.encode_rendering(text, messages)
        except ChatTemplateError as error:
            raise MessageError(str(error)) from None

    # -- stitching -----------------------------------------------------------------------------

    def _extension(self, branch: Branch, messages: list[dict[str, Any]], tools: Any) -> tuple[list[int] | None, str, int]:
        """(prompt ids, "", shared) when ``messages`` extend ``branch``; else (None, why not, messages shared)."""
        old = branch.conversation
        shared = 0
        while shared < min(len(old), len(messages)) and (
            old[shared] == messages[shared] or (shared == len(old) - 1 and _same_reply(messages[shared], old[shared]))
        ):
            shared += 1
        if branch.busy:
            return None, "the call it would extend was still being answered", shared
        if tools != branch.tools:
            return None, "the tools changed", shared
        if shared < len(old):
            if shared == len(messages) == len(old) - 1:
                return None, "the same messages as the call before (a repeated call)", shared
            if shared == len(old) - 1:
                return None, f"the assistant reply of the call before (message {shared}) was edited or dropped", shared
            return None, f"message {shared} of the earlier conversation was edited or dropped", shared
        if len(messages) == len(old):
            return None, "no new message after the assistant reply (a repeated call)", shared
        before = self._render(messages[: len(old)], tools, generation_prompt=False)
        after = self._render(messages, tools, generation_prompt=True)
        eot = self.template.end_of_turn_text
        cut = before.rfind(eot)
        if not after.startswith(before) or cut < 0:
            return None, "the chat template renders the earlier turns differently once new messages follow", shared
        delta = after[cut + len(eot) :]
        return self._encode(delta, messages[len(old) :]), "", shared

    def begin_call(self, messages: list[dict[str, Any]], tools: Any = None) -> AgentCall:
        """The call for ``messages`` (normalized): its branch and prompt ids; sample, then :meth:`finish_call`.

        Raises:
            EpisodeOver: the episode has ended, or this call is over ``max_turns`` (the episode ends truncated).
            MessageError: the template cannot render the messages.
        """
        self._admit()
        best = (-1, -1, "the episode's first call")  # (shared messages, branch, reason)
        for index in range(len(self.branches) - 1, -1, -1):  # the latest branch first: usually the one extended
            prompt_ids, reason, shared = self._extension(self.branches[index], messages, tools)
            if prompt_ids is not None:
                branch = self.branches[index]
                left = self._budget(len(branch.response_ids) + len(prompt_ids))
                call = AgentCall(len(self.calls), index, messages, branch.ids() + prompt_ids, rollback=len(branch.response_ids), max_new_tokens=left)
                self._add_observation(branch, prompt_ids)
                branch.busy = True
                self.calls.append(call)
                self.pending.append(call)
                return call
            if shared > best[0]:
                best = (shared, index, reason)
        shared, parent, reason = best
        prompt_ids = self._encode(self._render(messages, tools, generation_prompt=True), messages)
        self.branches.append(
            Branch(
                prompt_ids=prompt_ids, tools=tools, parent=parent if parent >= 0 else None,
                forked_at_call=len(self.calls) if self.calls else None, shared_messages=max(shared, 0),
                fork_reason=reason if self.calls else None, busy=True,
            )
        )
        call = AgentCall(len(self.calls), len(self.branches) - 1, messages, list(prompt_ids), max_new_tokens=self.max_response_tokens)
        self.calls.append(call)
        self.pending.append(call)
        return call

    def _admit(self) -> None:
        if self.ended is not None:
            raise EpisodeOver(f"episode {self.key!r} is over ({self.ended}); start a new episode")
        if self.max_turns is not None and len(self.calls) >= self.max_turns:
            self.end(f"turn limit of {self.max_turns} calls reached", truncated=True)
            raise EpisodeOver(f"episode {self.key!r} is over ({self.ended}); start a new episode")

    def _budget(self, used: int) -> int | None:
        """Tokens a call may sample on a branch whose response would hold ``used`` ids before it; ends the
        episode (truncated) and raises :class:`EpisodeOver` when that leaves none."""
        if self.max_response_tokens is None:
            return None
        if used >= self.max_response_tokens:
            self.end(f"response token budget of {self.max_response_tokens} reached", truncated=True)
            raise EpisodeOver(f"episode {self.key!r} is over ({self.ended}); start a new episode")
        return self.max_response_tokens - used

    def begin_completion(self, prompt: str | list[int]) -> AgentCall:
        """A ``/v1/completions`` call: it extends a completion branch whose prompt and completion (text, or
        ids) it starts with; otherwise it starts a new branch. Sample, then :meth:`finish_completion`."""
        self._admit()
        for index in range(len(self.branches) - 1, -1, -1):
            branch = self.branches[index]
            if branch.tools != _COMPLETION or branch.busy:
                continue
            if isinstance(prompt, list):
                ids = branch.ids()
                delta = prompt[len(ids) :] if len(prompt) > len(ids) and prompt[: len(ids)] == ids else None
            else:
                text = branch.text
                delta = self._encode(prompt[len(text) :], []) if text and len(prompt) > len(text) and prompt.startswith(text) else None
            if delta is not None:
                left = self._budget(len(branch.response_ids) + len(delta))
                call = AgentCall(len(self.calls), index, [], branch.ids() + delta, rollback=len(branch.response_ids), max_new_tokens=left)
                self._add_observation(branch, delta)
                branch.busy = True
                call.text_before, branch.text = branch.text, prompt if isinstance(prompt, str) else ""
                self.calls.append(call)
                self.pending.append(call)
                return call
        ids = list(prompt) if isinstance(prompt, list) else self._encode(prompt, [])
        reason = "the prompt does not start with an earlier prompt and its completion" if self.calls else None
        self.branches.append(
            Branch(prompt_ids=ids, tools=_COMPLETION, forked_at_call=len(self.calls) if self.calls else None,
                   fork_reason=reason, busy=True, text=prompt if isinstance(prompt, str) else "")
        )
        call = AgentCall(len(self.calls), len(self.branches) - 1, [], list(ids), max_new_tokens=self.max_response_tokens)
        self.calls.append(call)
        self.pending.append(call)
        return call

    def finish_completion(self, call: AgentCall, generation: Generation, text: str) -> None:
        """Record a completion; the branch's text becomes prompt + completion (+ the stop token sampled).

        Raises:
            EpisodeOver: if the episode ended while this call was sampled (its answer is dropped).
        """
        if call not in self.pending:
            raise EpisodeOver(f"episode {self.key!r} ended while this call was sampled ({self.ended}); its answer was dropped")
        branch = self.branches[call.branch]
        prompt_text = branch.text
        self.finish_call(call, generation, {"role": "assistant", "content": text}, text, close_turn=False)
        stop = self.tokenizer.decode(list(generation.token_ids[-1:])) if generation.finish_reason == "stop" else ""
        branch.text = prompt_text + text + stop if prompt_text else ""

    @staticmethod
    def _add_observation(branch: Branch, ids: list[int]) -> None:
        branch.response_ids += ids
        branch.loss_mask += [0] * len(ids)
        branch.logprobs += [0.0] * len(ids)

    def finish_call(
        self, call: AgentCall, generation: Generation, reply: dict[str, Any], action_text: str, *, close_turn: bool = True
    ) -> None:
        """Record what the policy sampled for ``call`` and the reply the agent gets.

        Raises:
            EpisodeOver: the episode ended while the call was sampled (its sample is dropped, not recorded).
        """
        if call not in self.pending:
            raise EpisodeOver(f"episode {self.key!r} ended while this call was sampled ({self.ended}); its answer was dropped")
        self.pending.remove(call)
        branch = self.branches[call.branch]
        start = len(branch.response_ids)
        ids = list(generation.token_ids)
        branch.response_ids += ids
        branch.loss_mask += [1] * len(ids)
        branch.logprobs += list(generation.logprobs) if generation.logprobs is not None else [0.0] * len(ids)
        branch.missing_logprobs = branch.missing_logprobs or (generation.logprobs is None and bool(ids))
        branch.turn_spans.append((start, start + len(ids)))
        branch.actions.append(action_text)
        if close_turn and not self.template.ends_turn(ids):  # cut by the length limit: close the turn, outside the loss
            closing = self.template.close_turn_ids()
            if self.max_response_tokens is not None and len(branch.response_ids) + len(closing) > self.max_response_tokens:
                self.end(f"response token budget of {self.max_response_tokens} reached", truncated=True)  # no room to close it
            else:
                self._add_observation(branch, closing)
        branch.conversation = [*call.messages, reply]
        branch.busy = False
        call.generation, call.reply = generation, reply

    def abandon_call(self, call: AgentCall) -> None:
        """The policy failed for ``call`` (the latest): undo it, so a retry extends the branch as this call would have."""
        if call not in self.pending:
            return
        self.pending.remove(call)
        branch = self.branches[call.branch]
        if self.calls and self.calls[-1] is call:
            self.calls.pop()
        if not branch.turn_spans and call.branch == len(self.branches) - 1:
            self.branches.pop()
            return
        del branch.response_ids[call.rollback :], branch.loss_mask[call.rollback :], branch.logprobs[call.rollback :]
        if branch.tools == _COMPLETION:
            branch.text = call.text_before
        branch.busy = False

    def end(self, reason: str, *, truncated: bool = False) -> None:
        """End the episode: later calls are refused. The first reason given is kept."""
        if self.ended is None:
            self.ended = reason
            self.truncated = truncated
        for call in reversed(self.pending):  # a call cut off mid-sample leaves no prompt tokens without an answer
            self.abandon_call(call)

    # -- results -------------------------------------------------------------------------------

    def trajectories(self, reward: float = 0.0) -> list[TokenTrajectory]:
        """One trajectory per branch; ``reward`` is put on the last turn of the branch of the last call.

        Each trajectory's ``metrics`` hold ``branch``, ``num_branches``, ``has_logprobs`` (False when a call's
        policy gave none: its log-probs are 0.0 placeholders, as :class:`~gem_core.rollout.session.EpisodeSession`
        says), and for a fork ``parent_branch``, ``forked_at_call``, ``shared_messages`` and ``fork_reason``.
        """
        last = self.calls[-1].branch if self.calls else None
        out = []
        for index, branch in enumerate(self.branches):
            rewards = [0.0] * len(branch.turn_spans)
            if index == last and rewards:
                rewards[-1] = float(reward)
            metrics: dict[str, Any] = {"branch": index, "num_branches": len(self.branches), "num_turns": len(rewards),
                                       "has_logprobs": not branch.missing_logprobs}
            if branch.forked_at_call is not None:
                metrics.update(
                    parent_branch=branch.parent, forked_at_call=branch.forked_at_call,
                    shared_messages=branch.shared_messages, fork_reason=branch.fork_reason,
                )
            ended = self.ended is not None
            out.append(
                TokenTrajectory(
                    prompt_ids=list(branch.prompt_ids), response_ids=list(branch.response_ids), loss_mask=list(branch.loss_mask),
                    logprobs=list(branch.logprobs), turn_spans=list(branch.turn_spans), rewards=rewards,
                    terminated=ended and not self.truncated and index == last,
                    truncated=self.truncated and index == last, actions=list(branch.actions), metrics=metrics,
                    infos=[{"episode": self.key}] * len(rewards),
                )
            )
        return out
