"""The HTTP side of the retrieval server: a Starlette app under uvicorn.

Protocol (the Search-R1 family's, so clients of either side interoperate):

- ``POST /retrieve`` with ``{"queries": [str, ...], "topk": int (optional), "return_scores": bool}``
  (or ``"query": str``, one query, as SkyRL-Gym's search tool sends it)
  answers ``{"result": [[{"document": {"id", "contents", ...}, "score": float}, ...], ...]}`` with one
  list per query, best first; without ``return_scores`` each inner list holds the documents alone.
- ``GET /health`` answers ``{"status": "ok", "documents": N}``.

Every request is bounded: the body's size and the time to send it, the number of queries, ``topk``
and the size of the answer. A request outside them gets a 4xx with a message (uvicorn's HTTP parser
answers 400 to a malformed request line or ``Content-Length``). Idle and stalled connections cost a
socket, not a thread, and not for long: headers and bodies have deadlines and connections are capped in
total (under the open-file limit) and per client (:mod:`gem_core.serve.connections`); the listen
backlog is large enough for many clients connecting at once.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from gem_core.serve.asgi import RequestError, listen_error, listening_socket, read_json
from gem_core.serve.connections import ConnectionLimits, add_connection_arguments, connection_limits_from, port_error, positive_int
from gem_core.tools.retrieval_server.index import BM25Index, load_corpus, shipped_corpus_path

__all__ = ["Limits", "create_app", "main", "parse_request"]


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server."""

    #: Largest request body in bytes.
    max_body_bytes: int = 1 << 20
    #: Seconds a client has to send its body.
    body_timeout: float = 10.0
    #: Queries per request.
    max_queries: int = 256
    #: Passages per query.
    max_topk: int = 50
    #: Largest answer in bytes; a request that would exceed it gets 413.
    max_response_bytes: int = 8 << 20


def parse_request(body: Any, default_topk: int, limits: Limits = Limits()) -> tuple[list[str], int, bool]:
    """Validate a ``/retrieve`` body; raises ValueError (a :class:`RequestError`) with a message for the client.

    Raises:
        RequestError: 422 for a body of the wrong shape or ``topk`` out of range, 413 for too many queries.
    """
    if not isinstance(body, dict):
        raise RequestError(422, 'expected a JSON object like {"queries": ["..."], "topk": 3, "return_scores": true}')
    queries = body.get("queries")
    if queries is None and isinstance(body.get("query"), str):  # SkyRL-Gym's search tool sends one query so
        queries = [body["query"]]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise RequestError(422, '"queries" must be a list of strings')
    if len(queries) > limits.max_queries:
        raise RequestError(413, f'{len(queries)} queries in one request; send at most {limits.max_queries} per request')
    topk = body.get("topk") or default_topk  # like Search-R1: a missing, null or 0 topk means the default
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise RequestError(422, '"topk" must be a positive integer')
    if topk > limits.max_topk:
        raise RequestError(422, f'"topk" is {topk}; at most {limits.max_topk} passages per query')
    return queries, topk, bool(body.get("return_scores", False))


def _clean(text: str) -> str:
    # A lone surrogate arrives as a JSON escape; it cannot be tokenized or encoded back as UTF-8.
    return text.encode("utf-8", "replace").decode("utf-8")


def create_app(index: BM25Index, default_topk: int = 3, limits: Limits = Limits()) -> Any:
    """The Starlette app answering ``/retrieve`` and ``/health`` from ``index``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    def reply(status: int, payload: Any) -> Response:
        return Response(json.dumps(payload, ensure_ascii=True), status, media_type="application/json")

    async def retrieve(request: Request) -> Response:
        try:
            body = await read_json(request, max_bytes=limits.max_body_bytes, timeout=limits.body_timeout)
            queries, topk, return_scores = parse_request(body, default_topk, limits)
        except RequestError as error:
            return reply(error.status, {"detail": str(error)})
        hits = await run_in_threadpool(index.search, [_clean(q) for q in queries], topk)
        if return_scores:
            result = [[{"document": doc, "score": score} for doc, score in row] for row in hits]
        else:
            result = [[doc for doc, _ in row] for row in hits]
        data = json.dumps({"result": result}, ensure_ascii=True)
        if len(data) > limits.max_response_bytes:
            detail = f"the answer would be {len(data)} bytes, over {limits.max_response_bytes}; ask fewer queries or a smaller topk"
            return reply(413, {"detail": detail})
        return Response(data, 200, media_type="application/json")

    async def health(request: Request) -> Response:
        return reply(200, {"status": "ok", "documents": len(index.documents)})

    async def not_found(request: Request, exc: Exception) -> Response:
        return reply(404, {"detail": f"no route {request.method} {request.url.path}; use POST /retrieve or GET /health"})

    async def wrong_method(request: Request, exc: Exception) -> Response:
        return reply(405, {"detail": f"{request.method} is not allowed on {request.url.path}; use POST /retrieve or GET /health"})

    routes = [Route("/retrieve", retrieve, methods=["POST"]), Route("/health", health, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: wrong_method})


def main(argv: list[str] | None = None) -> None:
    """``gem-retrieval-server``: serve BM25 retrieval over a JSONL corpus until interrupted."""
    parser = argparse.ArgumentParser(
        prog="gem-retrieval-server",
        description="Serve BM25 retrieval over a JSONL corpus with the Search-R1 protocol (POST /retrieve).",
    )
    parser.add_argument("--corpus", default=str(shipped_corpus_path()), help="JSONL corpus (default: the shipped demo corpus)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port, 0 to 65535 (0 picks a free one; the chosen port is printed)")
    # Positive at start: a zero or negative limit would fail every request later, blaming the client.
    parser.add_argument("--topk", type=positive_int, default=3, help="passages per query when a request gives no topk")
    parser.add_argument("--max-queries", type=positive_int, default=Limits.max_queries, help="queries per request")
    parser.add_argument("--max-topk", type=positive_int, default=Limits.max_topk, help="passages per query a request may ask for")
    add_connection_arguments(parser, ConnectionLimits(body_timeout=Limits.body_timeout))
    args = parser.parse_args(argv)
    if args.topk > args.max_topk:
        parser.error(f"--topk {args.topk} is over --max-topk {args.max_topk}: every request without a topk would be refused")
    if port_error(args.port):
        parser.exit(2, f"gem-retrieval-server: {port_error(args.port)}\n")
    try:
        import uvicorn  # noqa: F401  (checked here: one clear message when the extra is missing)
    except ImportError:
        parser.exit(2, "gem-retrieval-server: needs uvicorn and starlette: pip install -e \".[search]\"\n")
    try:
        index = BM25Index(load_corpus(args.corpus))
    except (OSError, ValueError) as error:
        parser.exit(2, f"gem-retrieval-server: cannot load the corpus: {error}\n")
    from gem_core.serve.connections import ConnectionGuard

    limits = Limits(max_queries=args.max_queries, max_topk=args.max_topk, body_timeout=args.body_timeout)
    guard = ConnectionGuard(connection_limits_from(args))
    try:
        sock = guard.listen(listening_socket(args.host, args.port))
    except OSError as error:
        parser.exit(2, f"gem-retrieval-server: {listen_error(args.host, args.port, error)}\n")
    host, port = sock.getsockname()[:2]
    print(f"gem-retrieval-server: {len(index.documents)} documents, listening on http://{host}:{port}/retrieve", flush=True)
    guard.serve(create_app(index, args.topk, limits), sock, timeout_keep_alive=5)


if __name__ == "__main__":
    main()
