"""A loopback HTTP server that records what reaches it: the proof that a crafted file sent nothing."""

from __future__ import annotations

import http.server
import threading


class RequestListener:
    """Records every request (``"METHOD /path"`` and its Authorization header) and answers 500.

    Use as a context manager; ``url`` is where it listens on 127.0.0.1.
    """

    def __init__(self):
        self.requests: list[tuple[str, str | None]] = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                listener.requests.append((f"{self.command} {self.path}", self.headers.get("Authorization")))
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
