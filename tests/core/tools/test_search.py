"""gem-retrieval-server and gem_core.tools.search: BM25 ranking over HTTP, the client tool, a dead server."""

from __future__ import annotations

import json

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("bm25s")

from gem_core.errors import InvalidArgument  # noqa: E402
from gem_core.tools.retrieval_server import BM25Index, load_corpus, shipped_corpus_path  # noqa: E402
from gem_core.tools.retrieval_server.server import parse_request  # noqa: E402
from gem_core.tools.search import SearchTool, format_passages  # noqa: E402
from gem_core.wrappers.tools import ToolRewards, ToolUse  # noqa: E402

from toy_env import AnswerEnv  # noqa: E402

# (query, title of the passage that must rank first in the shipped corpus)
RANKING_CASES = [
    ("who invented the world wide web at CERN", "World Wide Web"),
    ("capital city of Australia", "Canberra"),
    ("fastest land animal", "Cheetah"),
    ("first vaccine smallpox cowpox", "Vaccination"),
    ("tallest volcano in the solar system", "Mars"),
    ("which language did Guido van Rossum create", "Python programming language"),
]


def title_of(document: dict) -> str:
    return document["contents"].split("\n", 1)[0].strip('"')


def test_shipped_corpus_has_about_100_passages_in_search_r1_format():
    documents = load_corpus(shipped_corpus_path())
    assert len(documents) >= 100
    assert all(set(d) >= {"id", "contents"} and "\n" in d["contents"] for d in documents)
    assert len({d["id"] for d in documents}) == len(documents)


def test_corpus_with_title_and_text_fields(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"title": "Owls", "text": "Owls hunt at night."}) + "\n\n" + json.dumps({"text": "Bats too."}) + "\n")
    documents = load_corpus(path)
    assert [d["contents"] for d in documents] == ['"Owls"\nOwls hunt at night.', "Bats too."]
    assert [d["id"] for d in documents] == ["0", "1"]
    assert BM25Index(documents).search(["night owls"], 1)[0][0][0]["id"] == "0"


def test_bad_corpus_says_which_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"contents": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_corpus(path)


@pytest.mark.parametrize("body", [[], {"queries": "one"}, {"queries": [1]}, {"queries": ["q"], "topk": -1}, {"queries": ["q"], "topk": True}])
def test_bad_requests_are_rejected_with_a_reason(body):
    with pytest.raises(ValueError):
        parse_request(body, 3)


def test_a_single_query_field_is_one_query_as_skyrl_gym_s_search_tool_sends_it():
    assert parse_request({"query": "capital of France", "topk": 2, "return_scores": True}, 3) == (["capital of France"], 2, True)
    with pytest.raises(ValueError):
        parse_request({"query": ["not", "a", "string"]}, 3)


def test_server_ranks_the_shipped_corpus(retrieval_server):
    queries = [q for q, _ in RANKING_CASES]
    response = httpx.post(retrieval_server.url, json={"queries": queries, "topk": 3, "return_scores": True}, timeout=10)
    assert response.status_code == 200
    result = response.json()["result"]
    assert len(result) == len(queries)
    for (query, expected), hits in zip(RANKING_CASES, result):
        assert len(hits) == 3
        assert title_of(hits[0]["document"]) == expected, query
        scores = [hit["score"] for hit in hits]
        assert scores == sorted(scores, reverse=True) and scores[0] > scores[1]


def test_server_without_scores_returns_bare_documents(retrieval_server):
    response = httpx.post(retrieval_server.url, json={"queries": ["Mozart opera"]}, timeout=10)
    (hits,) = response.json()["result"]
    # only Mozart's passage holds either word: no zero-score padding up to topk (test_tools_field_bugs.py)
    assert len(hits) == 1 and title_of(hits[0]) == "Mozart" and "score" not in hits[0]


def test_server_answers_bad_requests_with_4xx_and_health(retrieval_server):
    assert httpx.post(retrieval_server.url, content=b"{oops", timeout=10).status_code == 400
    assert httpx.post(retrieval_server.url, json={"queries": "x"}, timeout=10).status_code == 422
    health = httpx.get(retrieval_server.url.replace("/retrieve", "/health"), timeout=10).json()
    assert health["status"] == "ok" and health["documents"] >= 100


def test_search_tool_returns_top_passages(retrieval_server):
    tool = SearchTool(retrieval_server.url, topk=2)
    (call,) = tool.parse("I should look it up. <search> capital city of Australia </search>")
    assert call.content == "capital city of Australia"
    answer = tool.execute(call)
    assert answer.ok and answer.observation.startswith("<information>Doc 1(Title: Canberra) Canberra is the capital")
    assert "Doc 2(Title:" in answer.observation and "Doc 3" not in answer.observation
    assert len(answer.info["scores"]) == 2


async def test_search_tool_async(retrieval_server):
    tool = SearchTool(retrieval_server.url, topk=1)
    answer = await tool.aexecute(tool.parse("<search>fastest land animal</search>")[0])
    assert answer.ok and "Title: Cheetah" in answer.observation


def test_empty_query_is_a_malformed_call():
    (call,) = SearchTool().parse("<search>  </search>")
    assert call.error and "empty" in call.error


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (dict(url="http://127.0.0.1:99999/retrieve"), "SearchTool(url='http://127.0.0.1:99999/retrieve'): the port must be 1 to 65535"),
        (dict(url="http://127.0.0.1:0/retrieve"), "the port must be 1 to 65535"),
        (dict(url="http://[::1/retrieve"), "SearchTool(url='http://[::1/retrieve'): not a URL (Invalid port"),
        (dict(url="not a url"), "SearchTool(url='not a url'): expected an http:// or https:// URL with a host"),
        (dict(url="file:///etc/passwd"), "expected an http:// or https:// URL with a host"),
        (dict(url="http:///retrieve"), "expected an http:// or https:// URL with a host"),
        (dict(url=8000), "SearchTool(url=8000): expected an http:// or https:// URL"),
        (dict(timeout=-1.0), "SearchTool(timeout=-1.0): expected a finite number of seconds above 0"),
        (dict(timeout=0), "SearchTool(timeout=0)"),
        (dict(timeout=float("nan")), "SearchTool(timeout=nan)"),
        (dict(timeout=float("inf")), "SearchTool(timeout=inf)"),
        (dict(timeout="5"), "SearchTool(timeout='5')"),
        (dict(timeout=True), "SearchTool(timeout=True)"),
    ],
)
def test_a_search_tool_that_could_never_search_is_refused_when_made(kwargs, fragment):
    """Otherwise every search raises from execute (an ExceptionGroup, InvalidURL, ValueError) or fails without trying."""
    with pytest.raises(InvalidArgument) as caught:
        SearchTool(**kwargs)
    assert fragment in str(caught.value)


def test_search_urls_with_ipv6_hosts_https_and_ports_are_accepted():
    for url in ("http://[::1]:8000/retrieve", "https://search.example.org/retrieve", "http://localhost:65535/retrieve"):
        assert SearchTool(url, timeout=0.5).url == url


def test_format_passages_accepts_both_result_shapes():
    doc = {"id": "1", "contents": '"T"\nbody'}
    assert format_passages([{"document": doc, "score": 1.0}]) == format_passages([doc]) == "Doc 1(Title: T) body"


def test_server_stopped_mid_episode(start_retrieval_server):
    server = start_retrieval_server()
    env = ToolUse(AnswerEnv(), [SearchTool(server.url, retries=1, backoff=0.05, timeout=2)], rewards=ToolRewards(per_error=-0.5))
    env.reset(seed=0)
    observation, reward, terminated, _, _ = env.step("<search>Berlin Wall</search>")
    assert "Title: Berlin" in observation and reward == 0.0 and not terminated
    server.stop()
    observation, reward, terminated, truncated, info = env.step("<search>Berlin Wall</search>")
    assert "Search failed" in observation and "unreachable" in observation
    assert reward == -0.5 and not terminated and not truncated
    assert info["tool_calls"][0]["ok"] is False
    assert env.step("42")[:3] == ("Correct.", 1.0, True)  # the episode goes on to its end


async def test_server_down_async_observation():
    tool = SearchTool("http://127.0.0.1:9/retrieve", retries=1, backoff=0.01, timeout=1)
    answer = await tool.aexecute(tool.parse("<search>x</search>")[0])
    assert not answer.ok and "Search failed" in answer.observation


# --- hostile requests and answers (issue 14 item 9) -------------------------------------------------


def _raw_exchange(url: str, request: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes to the server of ``url``; everything it answers before closing (or ``timeout``)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(request)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
                if b"\r\n\r\n" in answer:
                    head, _, body = answer.partition(b"\r\n\r\n")
                    length = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
                    if length and len(body) >= length[0]:
                        break
        except TimeoutError:
            pass
    return answer


def _post_raw(body: bytes, content_length: str) -> bytes:
    return (
        b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {content_length}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


@pytest.mark.parametrize(
    ("name", "request_bytes", "status"),
    [
        ("nested JSON", _post_raw(b"[" * 100_000, "100000"), b"400"),
        ("Content-Length abc", _post_raw(b"{}", "abc"), b"400"),
        ("negative Content-Length", _post_raw(b"{}", "-5"), b"400"),
        ("100k queries", _post_raw(json.dumps({"queries": ["q"] * 100_000}).encode(), str(len(json.dumps({"queries": ["q"] * 100_000})))), b"413"),
        ("huge topk", _post_raw(b'{"queries": ["q"], "topk": 1000000}', "35"), b"422"),
        ("body over the limit", _post_raw(b"", str(50 << 20)), b"413"),
    ],
)
def test_malformed_requests_get_a_4xx_and_the_server_stays_up(retrieval_server, name, request_bytes, status):
    answer = _raw_exchange(retrieval_server.url, request_bytes)
    assert answer.split(b" ", 2)[1:2] == [status], (name, answer[:300])
    health = httpx.get(retrieval_server.url.replace("/retrieve", "/health"), timeout=10)
    assert health.status_code == 200


def test_stalled_connections_do_not_block_other_clients(retrieval_server):
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(retrieval_server.url)
    stalled = []
    try:
        for _ in range(300):  # each sends half a request and then nothing
            sock = socket.create_connection((parts.hostname, parts.port), timeout=5)
            sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            stalled.append(sock)
        response = httpx.post(retrieval_server.url, json={"queries": ["Mozart opera"]}, timeout=10)
        assert response.status_code == 200 and title_of(response.json()["result"][0][0]) == "Mozart"
    finally:
        for sock in stalled:
            sock.close()


async def test_2000_requests_at_32_concurrent_without_an_error(retrieval_server):
    """Every request on a fresh connection, so the listen backlog is exercised (it was 5: 0.4% resets)."""
    import asyncio

    queries = [q for q, _ in RANKING_CASES]
    failures: list[str] = []
    count = iter(range(2000))
    limits = httpx.Limits(max_keepalive_connections=0, max_connections=32)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def worker() -> None:
            for n in count:
                try:
                    response = await client.post(retrieval_server.url, json={"queries": [queries[n % len(queries)]], "topk": 1})
                    if response.status_code != 200 or len(response.json()["result"]) != 1:
                        failures.append(f"{n}: HTTP {response.status_code}")
                except httpx.HTTPError as error:
                    failures.append(f"{n}: {type(error).__name__} {error}")

        await asyncio.gather(*(worker() for _ in range(32)))
    assert failures == []


@pytest.fixture
def fake_server():
    """A loopback server answering every connection with ``answer(request_bytes, socket)``."""
    import socketserver
    import threading

    servers = []

    def start(answer) -> str:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(30)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        data += self.request.recv(65536)
                    answer(data, self.request)
                except OSError:
                    pass

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/retrieve"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _http_answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body


@pytest.mark.parametrize("body", [b'{"result": [1]}', b'{"result": 1}', b'{"result": [[1, null, {"document": 3}]]}', b"[" * 50_000, b'"x"'])
def test_malformed_server_answers_are_failed_searches(fake_server, body):
    url = fake_server(lambda request, sock: sock.sendall(_http_answer(body)))
    tool = SearchTool(url, retries=0, timeout=5)
    answer = tool.execute(tool.parse("<search>x</search>")[0])
    assert isinstance(answer.observation, str) and len(answer.observation) < 1000
    if body.startswith(b'{"result": [['):
        assert answer.ok and "No passages found." in answer.observation
    else:
        assert not answer.ok and "unexpected body" in answer.observation


def test_a_50mb_answer_is_not_an_observation(fake_server):
    passage = {"document": {"id": "1", "contents": '"Big"\n' + "x" * (50 << 20)}, "score": 1.0}
    body = json.dumps({"result": [[passage]]}).encode()
    url = fake_server(lambda request, sock: sock.sendall(_http_answer(body)))
    answer = SearchTool(url, retries=0, timeout=20).execute(ToolCallFor("x"))
    assert not answer.ok and len(answer.observation) < 1000 and "bytes" in answer.observation


def test_a_long_passage_is_cut_to_max_chars(fake_server):
    passage = {"document": {"id": "1", "contents": '"Long"\n' + "y" * 100_000}, "score": 1.0}
    url = fake_server(lambda request, sock: sock.sendall(_http_answer(json.dumps({"result": [[passage]]}).encode())))
    answer = SearchTool(url, retries=0, max_chars=500).execute(ToolCallFor("x"))
    assert answer.ok and len(answer.observation) < 600 and "characters cut" in answer.observation


def test_a_trickling_server_is_cut_off_at_the_whole_call_timeout(fake_server):
    """1 byte per second never trips a per-read timeout; the call must still end at its 3 s deadline."""
    import time

    def trickle(request, sock):
        for byte in _http_answer(b'{"result": [[]]}'):
            sock.sendall(bytes([byte]))
            time.sleep(1.0)

    url = fake_server(trickle)
    start = time.monotonic()
    answer = SearchTool(url, timeout=3, retries=2).execute(ToolCallFor("x"))
    elapsed = time.monotonic() - start
    assert not answer.ok and "within 3 s" in answer.observation
    assert elapsed < 5, elapsed


async def test_a_trickling_server_async(fake_server):
    import time

    def trickle(request, sock):
        for byte in _http_answer(b'{"result": [[]]}'):
            sock.sendall(bytes([byte]))
            time.sleep(1.0)

    start = time.monotonic()
    answer = await SearchTool(fake_server(trickle), timeout=2, retries=1).aexecute(ToolCallFor("x"))
    assert not answer.ok and time.monotonic() - start < 4


def test_a_surrogate_in_the_query_is_searched(retrieval_server):
    tool = SearchTool(retrieval_server.url, topk=1)
    answer = tool.execute(ToolCallFor("capital city of Australia \ud800"))
    assert answer.ok and "Title: Canberra" in answer.observation
    (call,) = tool.parse("<search>\udfff Mozart</search>")
    assert tool.execute(call).ok


def test_surrogates_reaching_the_server_directly_are_answered(retrieval_server):
    response = httpx.post(retrieval_server.url, content=b'{"queries": ["\\ud800 Mozart"]}', timeout=10)
    assert response.status_code == 200 and title_of(response.json()["result"][0][0]) == "Mozart"


def ToolCallFor(query: str):
    from gem_core.tools.tool import ToolCall

    return ToolCall(tool="search", content=query, span=(0, 0))


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip"])
def test_a_compression_bomb_is_a_failed_search_without_inflating_it(fake_server, encoding):
    from http_bombs import gzip_bomb, http_answer, peak_memory

    bomb = gzip_bomb(256 << 20, layers=len(encoding.split(",")))
    url = fake_server(lambda request, sock: sock.sendall(http_answer(bomb, headers={"Content-Encoding": encoding})))
    with peak_memory() as peak:
        answer = SearchTool(url, retries=0, timeout=20, max_response_bytes=1 << 20).execute(ToolCallFor("x"))
    assert not answer.ok and len(answer.observation) < 1000
    assert ("stacks 2 encodings" if "," in encoding else "cap of 1048576 bytes decoded") in answer.observation
    assert peak[0] < 32 << 20, peak


def test_a_lone_surrogate_in_a_passage_is_replaced(fake_server):
    """A tokenizer raises on a lone surrogate (TypeError: TextInputSequence must be str), ending the episode."""
    passages = [{"document": {"contents": '"T\\ud800"\nbody \ud800 \udfff end'}, "score": 1.0}]
    url = fake_server(lambda request, sock: sock.sendall(_http_answer(json.dumps({"result": [passages]}).encode())))
    answer = SearchTool(url, retries=0, timeout=5).execute(ToolCallFor("x"))
    assert answer.ok and answer.observation == "<information>Doc 1(Title: T\\ud800) body ? ? end</information>"
    assert format_passages(passages) == "Doc 1(Title: T\\ud800) body ? ? end"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (dict(retries="2"), "retries='2'"),
        (dict(retries=-1), "retries=-1"),
        (dict(retries=None), "retries=None"),
        (dict(max_response_bytes="big"), "max_response_bytes='big'"),
        (dict(max_response_bytes=0), "max_response_bytes=0"),
        (dict(backoff="x"), "backoff='x'"),
        (dict(backoff=-1), "backoff=-1"),
        (dict(topk="3"), "topk='3'"),
        (dict(topk=None), "topk=None"),
        (dict(topk=2.5), "topk=2.5"),
        (dict(topk=0), "topk=0"),
        (dict(max_chars="10"), "max_chars='10'"),
        (dict(max_chars=True), "max_chars=True"),
    ],
)
def test_settings_of_the_wrong_type_or_range_are_refused_when_made(kwargs, fragment):
    """They were accepted, then failed every search (raised from execute, or a failed search each time)."""
    with pytest.raises(InvalidArgument) as caught:
        SearchTool("http://127.0.0.1:9/retrieve", **kwargs)
    assert fragment in str(caught.value) and "SearchTool" in str(caught.value)


def test_settings_at_the_edge_of_their_range_are_accepted():
    tool = SearchTool("http://127.0.0.1:9/retrieve", retries=0, backoff=0, topk=1, max_chars=1, max_response_bytes=1)
    assert (tool.retries, tool.backoff, tool.topk, tool.max_chars, tool.max_response_bytes) == (0, 0, 1, 1, 1)
