"""`gem-retrieval-server` refuses a bad corpus or a bad limit at start, in one line, before it listens."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("bm25s")


def start(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "gem_core.tools.retrieval_server", "--port", "0", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as running:  # it started serving instead of refusing
        pytest.fail(f"the server started: {running.stdout!r}")


@pytest.mark.parametrize(
    "content, why",
    [
        (b'{"contents": 5}\n', "'contents' must be a string, got int"),
        (b'{"text": null}\n', "'text' must be a string, got NoneType"),
        (b'{"text": "a fact", "title": 3}\n', "'title' must be a string, got int"),
    ],
)
def test_a_corpus_field_of_the_wrong_type_is_the_one_line_corpus_error(tmp_path, content, why):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(content)
    done = start("--corpus", str(corpus))
    assert done.returncode == 2, done
    assert done.stderr == f"gem-retrieval-server: cannot load the corpus: {corpus}:1: {why}.\n"


def test_a_corpus_that_is_not_utf8_names_the_file_and_line(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b'{"contents": "fine"}\n\xff\xfe\x00garbage\n')
    done = start("--corpus", str(corpus))
    assert done.returncode == 2, done
    assert done.stderr == f"gem-retrieval-server: cannot load the corpus: {corpus}:2: not UTF-8 text (byte 0xff); save the corpus as UTF-8.\n"


@pytest.mark.parametrize("flag, value", [("--topk", "-1"), ("--topk", "0"), ("--max-topk", "0"), ("--max-queries", "-5"), ("--max-queries", "x")])
def test_a_limit_that_is_not_positive_is_refused_at_start_naming_the_option(flag, value):
    done = start(flag, value)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr and "listening" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"gem-retrieval-server: error: argument {flag}: "), done.stderr


def test_a_default_topk_over_max_topk_is_refused_at_start():
    done = start("--topk", "9", "--max-topk", "5")
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines()[-1] == "gem-retrieval-server: error: --topk 9 is over --max-topk 5: every request without a topk would be refused"
