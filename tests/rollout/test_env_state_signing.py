"""Env states in trajectory files are signed (issue 27.1): :func:`decode_env_state` unpickles only a state
signed with the user's own key, so a shared file cannot run code when its states are read."""

from __future__ import annotations

import base64
import os
import pickle
import stat
import subprocess
import sys
import zlib

import pytest

from gem_core.rollout.trajectory_io import decode_env_state, encode_env_state


class _WritesMarker:
    """A pickle that, when loaded, creates a file: what a hostile trajectory would carry."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(autouse=True)
def own_key(monkeypatch, tmp_path):
    """Every test signs with a key of its own and a home of its own (no key file in the real home)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEM_STATE_KEY", "the-user's-own-key")


def test_a_signed_state_round_trips():
    state = {"board": [[1, 2], [3, 4]], "turn": 3, "rng": {"bit_generator": "PCG64"}}
    assert decode_env_state(encode_env_state(state)) == state


def test_an_unsigned_pickle_is_refused_before_it_is_unpickled(tmp_path):
    marker = tmp_path / "MARKER"
    old_style = base64.b64encode(zlib.compress(pickle.dumps({"x": _WritesMarker(marker)}))).decode("ascii")
    with pytest.raises(ValueError, match="not signed"):
        decode_env_state(old_style)
    assert not marker.exists()


def test_a_state_signed_with_another_key_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "MARKER"
    monkeypatch.setenv("GEM_STATE_KEY", "the-attacker's-key")
    forged = encode_env_state({"x": _WritesMarker(marker)})
    assert not marker.exists()  # encoding pickles, it does not load
    monkeypatch.setenv("GEM_STATE_KEY", "the-user's-own-key")
    with pytest.raises(ValueError, match="signature"):
        decode_env_state(forged)
    assert not marker.exists()


def test_a_state_edited_after_signing_is_refused():
    text = encode_env_state({"turn": 1})
    head, signature, payload = text.rsplit(":", 2)
    edited = base64.b64encode(zlib.compress(pickle.dumps({"turn": 2}))).decode("ascii")
    with pytest.raises(ValueError, match="signature"):
        decode_env_state(f"{head}:{signature}:{edited}")
    with pytest.raises(ValueError, match="not signed"):
        decode_env_state(12345)  # type: ignore[arg-type]


def test_without_a_key_variable_one_is_made_in_the_config_dir_readable_by_the_user_only(tmp_path, monkeypatch):
    monkeypatch.delenv("GEM_STATE_KEY")
    text = encode_env_state({"turn": 1})
    key_file = tmp_path / "home" / ".config" / "gem" / "state-key"
    assert key_file.is_file() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert decode_env_state(text) == {"turn": 1}
    key_file.write_text("another machine's key\n")
    with pytest.raises(ValueError, match="signature"):
        decode_env_state(text)


def test_a_state_signed_in_one_process_reads_in_another_with_the_same_key():
    code = "import sys; from gem_core.rollout.trajectory_io import encode_env_state as e; sys.stdout.write(e({'turn': 7}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert decode_env_state(done.stdout) == {"turn": 7}
