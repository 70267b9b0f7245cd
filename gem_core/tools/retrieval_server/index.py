"""BM25 over a JSONL corpus (with ``bm25s``), returning documents the way Search-R1 servers do."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["BM25Index", "load_corpus", "shipped_corpus_path"]


def shipped_corpus_path() -> Path:
    """The ~100-passage demo corpus that ships with GEM (for tests and demos)."""
    return Path(__file__).with_name("data") / "corpus.jsonl"


def load_corpus(path: str | Path) -> list[dict[str, Any]]:
    """Documents from a JSONL file, one object per line.

    Each line needs ``contents`` (Search-R1's format: ``'"Title"\\ntext'``) or ``text`` (with an
    optional ``title``); ``id`` defaults to the line number. Other fields are kept and returned.

    Raises:
        InvalidArgument: if the corpus is empty or a line is not a UTF-8 JSON document with ``contents`` or ``text``.
    """
    documents: list[dict[str, Any]] = []
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                bad = raw[error.start]
                raise InvalidArgument(f"{path}:{number}: not UTF-8 text (byte 0x{bad:02x}); save the corpus as UTF-8.") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InvalidArgument(f"{path}:{number}: not a JSON object ({error}); expected one document per line.") from None
            if not isinstance(record, dict) or not ("contents" in record or "text" in record):
                raise InvalidArgument(f"{path}:{number}: a document needs a 'contents' or a 'text' field.")
            for key in ("contents", "text", "title"):
                if key in record and not isinstance(record[key], str) and not (key == "title" and record[key] is None):
                    raise InvalidArgument(f"{path}:{number}: {key!r} must be a string, got {type(record[key]).__name__}.")
            if "contents" not in record:
                title = record.get("title")
                record["contents"] = f'"{title}"\n{record["text"]}' if title else str(record["text"])
            record.setdefault("id", str(len(documents)))
            documents.append(record)
    if not documents:
        raise InvalidArgument(f"{path}: the corpus is empty.")
    return documents


class BM25Index:
    """A ``bm25s`` index of ``documents``' ``contents``; :meth:`search` is safe to call from many threads."""

    def __init__(self, documents: list[dict[str, Any]]):
        import bm25s

        self._bm25s = bm25s
        self.documents = documents
        self._retriever = bm25s.BM25()
        tokens = bm25s.tokenize([d["contents"] for d in documents], stopwords="en", show_progress=False)
        self._retriever.index(tokens, show_progress=False)
        self._lock = threading.Lock()

    def search(self, queries: list[str], topk: int) -> list[list[tuple[dict[str, Any], float]]]:
        """For each query, up to ``topk`` best documents and their BM25 scores, best first: only documents that
        match a word of it (as Lucene's BM25 in Search-R1's servers), so a query matching none finds nothing
        instead of ``bm25s``' padding of zero-score documents shown as the best matches."""
        k = max(1, min(int(topk), len(self.documents)))
        if not queries:
            return []
        tokens = self._bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False)
        with self._lock:
            indices, scores = self._retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return [
            [(self.documents[int(i)], float(s)) for i, s in zip(row_indices, row_scores, strict=True) if s > 0]
            for row_indices, row_scores in zip(indices, scores, strict=True)
        ]
