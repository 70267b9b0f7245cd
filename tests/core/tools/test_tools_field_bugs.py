"""Defects found in the field in tool use, the terminal env, the judge's verdict cache and the BM25 index."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gem_core.envs.terminal.terminal_env import TerminalEnv, extract_command
from gem_core.errors import InvalidArgument
from gem_core.judge.cache import VerdictCache
from gem_core.tools.search import SearchTool
from gem_core.wrappers.tools import ToolUse

from toy_env import AnswerEnv

# ------------------------------------------------------------------------------ native calls' names

MALFORMED_CALLS = {
    "hermes": '<tool_call>{{"name": "{name}", "arguments": 5}}</tool_call>',
    "llama3_json": '{{"name": "{name}", "parameters": [1]}}',
    "mistral": '[TOOL_CALLS] [{{"name": "{name}", "arguments": 3}}]',
}


@pytest.mark.parametrize("call_format", sorted(MALFORMED_CALLS))
@pytest.mark.parametrize("name", ["\\ud800", "\\udfff", "x" * 100_000, "\\ud800" * 50_000])
def test_a_malformed_native_call_shows_its_name_encodable_and_short(call_format, name):
    """A call whose name held a lone surrogate (a JSON escape) and whose arguments were malformed put the raw
    surrogate into the observation ('[\\ud800 call error] ...'), which no tokenizer encodes; a huge name was
    copied whole."""
    env = ToolUse(AnswerEnv(), [SearchTool()], call_format=call_format)
    env.reset(seed=0)
    observation, _, terminated, _, info = env.step(MALFORMED_CALLS[call_format].format(name=name))
    observation.encode("utf-8")
    repr(info).encode("utf-8")
    assert not terminated and "call error" in observation and len(observation) < 500
    assert info["tool_calls"][0]["info"]["format_error"]


def test_a_malformed_deepseek_call_shows_its_name_encodable():
    """As above, in DeepSeek's format, where the name is raw text between the separator and the fence."""
    env = ToolUse(AnswerEnv(), [SearchTool()], call_format="deepseek_v3")
    env.reset(seed=0)
    action = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>\ud800\n```json\n[1]\n```<｜tool▁call▁end｜>"
    observation = env.step(action)[0]
    observation.encode("utf-8")
    assert "call error" in observation


@pytest.mark.parametrize("call_format", ["hermes", "mistral"])
def test_an_unknown_huge_tool_name_is_shown_cut(call_format):
    """An unknown tool's name was copied whole into the observation (twice): a megabyte name, a megabyte answer."""
    env = ToolUse(AnswerEnv(), [SearchTool()], call_format=call_format)
    env.reset(seed=0)
    template = {"hermes": '<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>',
                "mistral": '[TOOL_CALLS] [{{"name": "{name}", "arguments": {{}}}}]'}[call_format]
    observation = env.step(template.format(name="\\ud800" + "y" * 1_000_000))[0]
    observation.encode("utf-8")
    assert "unknown tool" in observation and "search" in observation and len(observation) < 1000


# ------------------------------------------------------------------------------ terminal env


@pytest.mark.parametrize(
    ("action", "command"),
    [("```shell\nsubmit\n```", "submit"), ("```shell\nls -la\n```", "ls -la"), ("```shell ls```", "ls"),
     ("```shellscript\npwd\n```", None), ("```bashrc\nls\n```", None), ("```sh-session\nls\n```", None),
     ("```bash\nls\n```", "ls"), ("```sh pwd```", "pwd"), ("```bash\tls```", "ls")],
)
def test_a_longer_fence_tag_is_not_read_as_bash_plus_a_command(action, command):
    """```shell was read as the tag "sh" and the command "ell\\n...": ```shell\\nsubmit\\n``` ran `ell` then `submit`
    and never submitted; ```shellscript and ```bashrc ran "ellscript" and "rc"."""
    assert extract_command(action) == command


def test_a_shell_block_submits():
    """```shell\\nsubmit\\n``` ran "ell" and "submit" as commands (exit 127) instead of ending the episode."""
    env = TerminalEnv(tasks=["sort_unique"], sandbox="process", command_timeout=5.0)
    try:
        env.reset(seed=0)
        _, _, terminated, _, info = env.step("```shell\nsubmit\n```")
        assert terminated and info["success"] is False
    finally:
        env.close()


@pytest.mark.parametrize("memory_mb", [1, 8, 15])
def test_a_memory_limit_below_the_sandboxs_floor_is_refused_at_construction(memory_mb):
    """memory_mb=8 passed the constructor (at least 1), then every command step raised InvalidArgument from the
    sandbox (its floor is 16 MiB): the limit failed mid-training instead of when the env was made."""
    with pytest.raises(InvalidArgument, match="memory_mb"):
        TerminalEnv(memory_mb=memory_mb, sandbox="process")


def test_the_sandboxs_smallest_memory_limit_is_accepted():
    TerminalEnv(memory_mb=16, sandbox="process").close()


# ------------------------------------------------------------------------------ judge verdict cache

SURROGATE_REPLY = '{"scores": {"correctness": 10}, "reason": "fine \ud800"}'


def test_a_reply_with_a_lone_surrogate_round_trips_through_a_sqlite_cache(tmp_path):
    """put() raised UnicodeEncodeError (not a sqlite3.Error, so not caught) for a reply holding a lone surrogate:
    the judge turned the verdict into reward 0 with the file cache and paid it with the in-memory one."""
    path = tmp_path / "verdicts.sqlite"
    cache = VerdictCache(path)
    try:
        cache.put("k", "model \udfff", SURROGATE_REPLY)
        cache.put("plain", "model", "plain reply")
        assert cache.get("k") == SURROGATE_REPLY and cache.get("plain") == "plain reply"
    finally:
        cache.close()
    again = VerdictCache(path)
    try:
        again.check()
        assert again.get("k") == SURROGATE_REPLY and again.get("plain") == "plain reply" and len(again) == 2
    finally:
        again.close()


def test_a_cache_written_as_text_stays_readable(tmp_path):
    """Old caches hold replies as TEXT: they must still be hits."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, model TEXT NOT NULL, reply TEXT NOT NULL)")
    db.execute("INSERT INTO verdicts VALUES (?, ?, ?)", ("k", "m", "old reply é"))
    db.commit()
    db.close()
    cache = VerdictCache(path)
    try:
        assert cache.get("k") == "old reply é"
    finally:
        cache.close()


def _judge_server(content: str) -> ThreadingHTTPServer:
    """A one-route OpenAI-style server answering every chat completion with ``content`` (surrogates kept as escapes)."""
    body = json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_cache_choice_does_not_change_the_reward_of_a_reply_with_a_lone_surrogate(tmp_path):
    """With a SQLite cache the verdict became reward 0 ("judge: UnicodeEncodeError"); in memory it paid 1.0."""
    pytest.importorskip("openai")
    from gem_core.judge import Judge

    content = '{"scores": {"correctness": 10, "completeness": 10, "clarity": 10}, "reason": "fine \ud800"}'
    server = _judge_server(content)
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        rewards = {}
        for name, cache in (("memory", None), ("sqlite", str(tmp_path / "v.sqlite"))):
            judge = Judge(url, "m", cache=cache, max_retries=0, timeout=10)
            try:
                verdict = judge.judge("What is 2+2?", "4")
                assert verdict.error is None, verdict.error
                rewards[name] = verdict.reward
                again = judge.judge("What is 2+2?", "4")  # a hit
                assert again.reward == verdict.reward
            finally:
                judge.close()
        assert rewards["memory"] == rewards["sqlite"] > 0
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------ BM25 index


@pytest.mark.parametrize("query", ["zzzzqqq", "the", "!!!", ""])
def test_a_query_matching_no_word_finds_nothing(query):
    """bm25s pads its answer with zero-score passages: a query matching no word got topk unrelated passages,
    shown to the model as the best matches instead of "No passages found."."""
    pytest.importorskip("bm25s")
    from gem_core.tools.retrieval_server.index import BM25Index, load_corpus, shipped_corpus_path

    assert BM25Index(load_corpus(shipped_corpus_path())).search([query], 3) == [[]]


def test_matching_queries_keep_only_passages_that_match():
    pytest.importorskip("bm25s")
    from gem_core.tools.retrieval_server.index import BM25Index

    documents = [{"id": "0", "contents": "Owls hunt at night."}, {"id": "1", "contents": "Bats sleep by day."},
                 {"id": "2", "contents": "Cats purr."}]
    hits, none = BM25Index(documents).search(["owls", "zzzz"], 3)
    assert [d["id"] for d, _ in hits] == ["0"] and all(score > 0 for _, score in hits) and none == []
