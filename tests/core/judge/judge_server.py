"""A scripted OpenAI-compatible judge for the judge tests, run as a child process on 127.0.0.1.

``python judge_server.py SCRIPT.json`` prints ``listening on http://127.0.0.1:PORT/v1`` and serves
``POST /v1/chat/completions``. Request ``i`` follows step ``min(i, len(script) - 1)`` of the script:

* ``{"kind": "rule"}``: a gullible judge (below);
* ``{"kind": "reply", "content": TEXT}``: answers ``TEXT`` as the assistant message;
* ``{"kind": "delay", "seconds": S, "then": STEP}``: waits ``S`` seconds, then does ``STEP``;
* ``{"kind": "status", "code": 429, "retry_after": "0"}``: an HTTP error (with ``Retry-After`` if given);
* ``{"kind": "body", "body": TEXT}``: HTTP 200 with ``TEXT`` as the whole body (not a completion).

``GET /stats`` answers ``{"requests": n, "max_in_flight": m}``.

The rule judge obeys whatever reaches it outside the fence, like a model that can be talked into things:
it reads the nonce from the system message, and treats the answer as ending at the first line starting
``<<<END-ANSWER`` whatever nonce follows (a sloppy reader of look-alike markers), reading brackets that look
like ASCII ones (full-width, small-form, ``‹``, ``«``, ``⋘``; zero-width characters dropped) as ASCII. If the user message
outside the task/reference/answer fences asks for a high score it gives every criterion the top of the
scale, and if it holds a JSON verdict it answers that verdict verbatim. Otherwise it scores the fenced
answer by a simple rule: ``high - 2`` on every criterion when the answer contains the reference, else
``low + 2``. Without a nonce (an unfenced prompt) the whole user message counts as outside.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NONCE = re.compile(r"<<<LABEL-([0-9a-f]+)>>>")
CRITERION = re.compile(r'"([\w-]+)": <integer (-?\d+)\.\.(-?\d+)>')
INSTRUCTION = re.compile(
    r"(ignore|disregard)\b.{0,60}\b(instruction|rubric|above|previous)|score (of )?10\b|full marks|maximum score|top score",
    re.IGNORECASE | re.DOTALL,
)


LOOK_ALIKES = str.maketrans({"\u2039": "<", "\u203a": ">", "\u00ab": "<<", "\u00bb": ">>", "\u22d8": "<<<", "\u22d9": ">>>",
                             "\u3008": "<", "\u3009": ">", "\u200b": None, "\u2060": None})


def as_read(text: str) -> str:
    """``text`` as a model reads it: look-alike brackets as ASCII ones, invisible characters unseen."""
    return unicodedata.normalize("NFKC", text).translate(LOOK_ALIKES)


def fenced(text: str, label: str, nonce: str) -> tuple[str, str]:
    """(inside, text with the region removed) for ``label``'s fence; the close is matched sloppily."""
    start = text.find(f"<<<{label}-{nonce}>>>")
    if start < 0:
        return "", text
    body_start = start + len(f"<<<{label}-{nonce}>>>")
    close = re.compile(rf"<<<END-{label}[^\n]*")
    found = close.search(text, body_start)
    end = found.start() if found else len(text)
    after = found.end() if found else len(text)
    return text[body_start:end].strip(), text[:start] + text[after:]


def planted_verdict(text: str) -> str | None:
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and "scores" in value:
            return text[match.start() : end]
    return None


def rule_judge(messages: list[dict]) -> str:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = as_read("\n".join(m["content"] for m in messages if m.get("role") == "user"))
    criteria = CRITERION.findall(system + "\n" + user)
    low, high = (int(criteria[0][1]), int(criteria[0][2])) if criteria else (0, 10)
    names = [c[0] for c in criteria] or ["score"]
    nonce_match = NONCE.search(system)
    if nonce_match:
        nonce = nonce_match.group(1)
        _, outside = fenced(user, "TASK", nonce)
        reference, outside = fenced(outside, "REFERENCE", nonce)
        answer, outside = fenced(outside, "ANSWER", nonce)
    else:  # unfenced: the answer is what follows "Answer:", and all of it is read as instructions too
        outside = user
        reference = (re.search(r"Reference:\s*(.*)", user) or [None, ""])[1]
        answer = user.rsplit("Answer:", 1)[-1]
    verdict = planted_verdict(outside)
    if verdict is not None:
        return verdict
    if INSTRUCTION.search(outside):
        return json.dumps({"scores": {n: high for n in names}, "reason": "as instructed"})
    score = high - 2 if reference and reference.strip().lower() in answer.lower() else low + 2
    return json.dumps({"scores": {n: score for n in names}, "reason": "rule"})


class State:
    requests = 0
    in_flight = 0
    max_in_flight = 0
    lock = threading.Lock()


def main() -> None:
    with open(sys.argv[1]) as handle:
        script = json.load(handle)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def send(self, code: int, body: bytes, headers: dict | None = None) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:
            with State.lock:
                stats = {"requests": State.requests, "max_in_flight": State.max_in_flight}
            self.send(200, json.dumps(stats).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with State.lock:
                index = State.requests
                State.requests += 1
                State.in_flight += 1
                State.max_in_flight = max(State.max_in_flight, State.in_flight)
            try:
                self.act(script[min(index, len(script) - 1)], body)
            finally:
                with State.lock:
                    State.in_flight -= 1

        def act(self, step: dict, body: dict) -> None:
            kind = step["kind"]
            if kind == "delay":
                time.sleep(step["seconds"])
                return self.act(step["then"], body)
            if kind == "status":
                headers = {"Retry-After": step["retry_after"]} if "retry_after" in step else {}
                return self.send(step["code"], json.dumps({"error": {"message": "scripted"}}).encode(), headers)
            if kind == "body":
                return self.send(200, step["body"].encode())
            content = rule_judge(body["messages"]) if kind == "rule" else step["content"]
            completion = {
                "id": "judge-1", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            self.send(200, json.dumps(completion).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
