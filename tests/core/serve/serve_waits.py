"""What the serve tests wait on: a condition polled until a deadline, and the sessions a server holds."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

#: The env module the serve tests start `gem serve` with (``--import``): steps that sleep, hang or answer badly.
SLOW_ENV = str(Path(__file__).with_name("slow_env.py"))


def wait_for(predicate, seconds: float = 10.0):
    """``predicate()``'s first true value within ``seconds`` (polled every 0.1 s), else its last value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def sessions(url: str) -> int:
    """How many sessions the server at ``url`` holds."""
    return httpx.get(url + "/health", timeout=5).json()["sessions"]
