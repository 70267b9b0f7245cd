"""The env-state signing key file is trusted only when no other user can read, write or swap it (issue 47.3).

Whoever can write the key signs states this user then unpickles, and whoever can read it forges them:
like ssh with a private key, a key file of mode 0644, a symbolic link, another user's file, or a key in a
folder anyone may write (not sticky) is refused with a message naming the path and the fix.
"""

from __future__ import annotations

import os
import stat

import pytest

from gem_core.errors import GemError
from gem_core.rollout.trajectory_io import UnsafeKeyFile, decode_env_state, encode_env_state, state_key

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OTHER_UID = 65534


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home of its own (mode 0700) with no key variable: the key comes from the file."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GEM_STATE_KEY", raising=False)
    return home


def key_file(home, text="k" * 64, mode=0o600):
    path = home / ".config" / "gem" / "state-key"
    path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


def test_a_private_key_file_is_used(home):
    path = key_file(home)
    assert state_key() == b"k" * 64
    assert decode_env_state(encode_env_state({"turn": 1})) == {"turn": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o666, 0o620])
def test_a_key_file_others_may_read_or_write_is_refused_naming_the_path_and_chmod(home, mode):
    path = key_file(home, mode=mode)
    with pytest.raises(UnsafeKeyFile) as caught:
        state_key()
    message = str(caught.value)
    assert str(path) in message and f"chmod 600 {path}" in message and f"{mode:04o}" in message
    assert isinstance(caught.value, GemError) and isinstance(caught.value, PermissionError)


def test_a_key_file_in_a_folder_anyone_may_write_is_refused(home):
    path = key_file(home)
    os.chmod(path.parent, 0o777)
    with pytest.raises(UnsafeKeyFile) as caught:
        state_key()
    assert str(path.parent) in str(caught.value) and f"chmod o-w {path.parent}" in str(caught.value)


def test_a_world_writable_folder_with_the_sticky_bit_is_accepted(home):
    # /tmp-like folders (a HOME in /tmp): others may not rename or delete what is yours there.
    path = key_file(home)
    os.chmod(path.parent.parent, 0o1777)
    assert state_key() == b"k" * 64


def test_no_key_is_made_in_a_folder_anyone_may_write(home):
    folder = home / ".config" / "gem"
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(folder, 0o777)
    with pytest.raises(UnsafeKeyFile, match="chmod o-w"):
        state_key()
    assert not (folder / "state-key").exists()


def test_a_symbolic_link_as_the_key_file_is_refused(home, tmp_path):
    elsewhere = tmp_path / "someone-elses-key"
    elsewhere.write_text("their key\n")
    os.chmod(elsewhere, 0o600)
    if ROOT:
        os.chown(elsewhere, OTHER_UID, OTHER_UID)
    link = home / ".config" / "gem" / "state-key"
    link.parent.mkdir(parents=True, mode=0o700)
    link.symlink_to(elsewhere)
    with pytest.raises(UnsafeKeyFile) as caught:
        state_key()
    assert str(link) in str(caught.value) and "symbolic link" in str(caught.value) and f"rm {link}" in str(caught.value)


def test_a_dangling_symbolic_link_is_refused_not_replaced(home, tmp_path):
    target = tmp_path / "planted-target"
    link = home / ".config" / "gem" / "state-key"
    link.parent.mkdir(parents=True, mode=0o700)
    link.symlink_to(target)
    with pytest.raises(UnsafeKeyFile, match="symbolic link"):
        state_key()
    assert not target.exists()


@pytest.mark.skipif(not ROOT, reason="making a file another user's needs root")
def test_another_users_key_file_is_refused(home):
    path = key_file(home)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeKeyFile) as caught:
        state_key()
    assert str(path) in str(caught.value) and f"uid {OTHER_UID}" in str(caught.value)


@pytest.mark.skipif(not ROOT, reason="making a folder another user's needs root")
def test_a_key_in_a_folder_another_user_owns_is_refused(home):
    path = key_file(home)
    os.chown(path.parent, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeKeyFile, match=f"uid {OTHER_UID}"):
        state_key()


def test_the_key_variable_needs_no_file(home, monkeypatch):
    key_file(home, mode=0o666)
    monkeypatch.setenv("GEM_STATE_KEY", "from-the-environment")
    assert state_key() == b"from-the-environment"


def test_without_a_home_directory_the_error_names_the_key_variable(no_home, monkeypatch):
    """No ``~`` (a container's random uid): the key cannot live there, and the error says what to set instead
    of ``Could not determine home directory``."""
    monkeypatch.delenv("GEM_STATE_KEY", raising=False)
    with pytest.raises(GemError, match="GEM_STATE_KEY"):
        state_key()
    monkeypatch.setenv("GEM_STATE_KEY", "k" * 64)
    assert state_key() == b"k" * 64
