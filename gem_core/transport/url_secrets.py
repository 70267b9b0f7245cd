"""Passwords in URLs kept out of what is printed, and out of the way of an API key.

A server URL may carry user info (``http://user:password@host/v1``): printed as is (an error, a
``continue with: gem eval --resume ...`` hint, a log line) it leaks the password; handed to httpx as is,
it becomes a Basic ``Authorization`` header that replaces the Bearer token the caller meant to send.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["redact_user_info", "without_user_info", "has_user_info"]

_USER_INFO = re.compile(r"(https?://)(?:([^:@/\s]*):)?[^@/\s]*@", re.IGNORECASE)


def redact_user_info(text: str, *secrets: str | None) -> str:
    """``text`` with each of ``secrets`` (and its percent-decoded form) and the user info of every URL
    in it masked as ``***`` (``http://user:***@host``; a user alone: ``http://***@host``)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
            if unquote(secret) != secret:
                text = text.replace(unquote(secret), "***")
    return _USER_INFO.sub(lambda m: m.group(1) + (m.group(2) + ":***@" if m.group(2) else "***@"), text)


def has_user_info(url: str) -> bool:
    """Whether ``url`` names a user or password before its host."""
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def without_user_info(url: str) -> str:
    """``url`` with its user info removed (``http://user:pw@host:8000/v1`` becomes ``http://host:8000/v1``)."""
    parts = urlsplit(url)
    if not has_user_info(url):
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
