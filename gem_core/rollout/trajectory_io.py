"""Trajectories on disk: a lossless JSONL record per episode, and the SFT / preference views TRL reads.

Stored rollouts outlive the run that made them: a grader bug is fixed by re-scoring the stored actions
(:mod:`gem_core.rollout.replay`) instead of paying for inference again, and good episodes become
supervised or preference data. One line per :class:`TokenTrajectory`, every field kept (ids, mask,
logprobs, the policy version of each sampled token, spans, rewards, texts, infos, and the env state
before each turn when the episode recorded it), plus the env label needed to rebuild the env. Files
written before env states or versions existed read the same, without them.

An env state is Python objects (an RNG, a board), so it is stored as a pickle (zlib-compressed, base64
text), signed with an HMAC under the user's own key (:func:`state_key`). Reading a file never unpickles;
:func:`decode_env_state` does, on request, and only after the signature matches: a pickle can run code,
so a state from someone else's file (or an edited one) is refused, never loaded.
"""

from __future__ import annotations

import base64
import dataclasses
import errno
import hashlib
import hmac
import itertools
import json
import math
import operator
import os
import pickle
import secrets
import stat
import warnings
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gem_core.errors import GemError, InvalidArgument, MalformedFile, UsageError
from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rollout.vision import TrajectoryImage
from gem_core.transport.atomic_file import atomic_path

__all__ = [
    "TRAJECTORY_FORMAT",
    "trajectory_to_record",
    "trajectory_from_record",
    "write_trajectories",
    "read_trajectories",
    "STATE_FORMAT",
    "encode_env_state",
    "decode_env_state",
    "state_key",
    "UnsafeKeyFile",
    "sft_records",
    "preference_pairs",
]

TRAJECTORY_FORMAT = "gem.trajectory/1"
"""Version tag of each JSONL trajectory record; a reader refuses a record of another format."""
_FIELDS = {f.name for f in dataclasses.fields(TokenTrajectory)}


STATE_FORMAT = "gem.state/2"
"""The prefix of a signed state: ``gem.state/2:<hex HMAC-SHA256 of the payload>:<payload>``."""
#: Where the signing key lives when ``$GEM_STATE_KEY`` is unset (made on first use, readable by the user only).
STATE_KEY_FILE = Path(".config", "gem", "state-key")


class UnsafeKeyFile(GemError, PermissionError):
    """The env-state key file, or a folder above it, is one another user could read, write or swap."""


def state_key() -> bytes:
    """The key that signs env states: ``$GEM_STATE_KEY`` (set it alike on every machine of a job), else
    the key in ``~/.config/gem/state-key``, made (random, mode 0600) the first time one is needed.

    Raises:
        UnsafeKeyFile: the key file is a symbolic link, not a regular file, not the user's own, readable or
            writable by others (like ssh with a private key), or in a folder others may write (and not sticky).
        UsageError: no ``$GEM_STATE_KEY`` and no home directory to keep the key in (a container's random uid).
    """
    from gem_core.settings import environment_value, home_dir

    value = environment_value("GEM_STATE_KEY")
    if value is not None:
        return value.encode("utf-8")
    home = home_dir()
    if home is None:
        raise UsageError(
            "cannot find a home directory (no $HOME, and no passwd entry for this uid) to keep the env-state signing "
            "key in; set GEM_STATE_KEY (alike on every machine of the job)."
        )
    path = home / STATE_KEY_FILE
    try:
        return _key_in(path)
    except FileNotFoundError:
        pass
    try:
        return _new_key(path)
    except UnsafeKeyFile:
        raise
    except OSError as exc:  # a read-only home, say
        raise OSError(f"cannot make the env-state signing key {path} ({exc.strerror or exc}); set GEM_STATE_KEY instead.") from exc


def _new_key(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check_folders(path)  # before writing a key where another user could swap it
    # Written whole under a private name, then linked into place: a worker starting at the same moment
    # never reads a half-written key, and the first link wins (both then use that key).
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_hex(32).encode("ascii") + b"\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
    finally:
        draft.unlink(missing_ok=True)
    return _key_in(path)


_FIX = "or set GEM_STATE_KEY instead"


def _key_in(path: Path) -> bytes:
    """The key in ``path``, read only from a regular file of this user's that no one else may read or write.

    Whoever can write the key signs states this user then unpickles (code runs), and whoever can read it
    forges them: so, as ssh does for a private key, a key file others could reach is refused, not used.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW: the last part is a symbolic link
            raise UnsafeKeyFile(
                f"The env-state key file {path} is a symbolic link (it could point at a file someone else controls); "
                f"refused. Remove it (rm {path}; a new key is made on next use) {_FIX}."
            ) from None
        raise
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeKeyFile(f"The env-state key file {path} is not a regular file; refused. Remove it (a new key is made) {_FIX}.")
        if hasattr(os, "geteuid"):
            if info.st_uid != os.geteuid():
                raise UnsafeKeyFile(
                    f"The env-state key file {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); refused. "
                    f"Remove it (rm {path}; a new key is made on next use) {_FIX}."
                )
            if info.st_mode & 0o077:
                raise UnsafeKeyFile(
                    f"Permissions {stat.S_IMODE(info.st_mode):04o} for the env-state key file {path} are too open: others could "
                    f"read or change the key that signs your states; refused. Run chmod 600 {path} (and make a new key if "
                    f"someone may have read it: rm {path}) {_FIX}."
                )
        _check_folders(path)
        key = file.read(4096).strip()
    if not key:
        raise MalformedFile(f"The env-state key file {path} is empty; delete it (a new key is made) or set GEM_STATE_KEY.")
    return key


def _check_folders(path: Path) -> None:
    """Refuse a key under a folder that another user may write without the sticky bit (they could swap the
    key file), or that another user (not root) owns: checked from the key's folder up to ``/``, as ssh does."""
    if not hasattr(os, "geteuid"):
        return
    me = os.geteuid()
    for folder in path.absolute().parents:
        info = os.stat(folder)
        if info.st_uid not in (me, 0):
            raise UnsafeKeyFile(
                f"The env-state key file {path} lies in {folder}, which belongs to uid {info.st_uid}, not to you or root: "
                f"they could swap the key; refused. Keep the key in a folder of your own (HOME) {_FIX}."
            )
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            raise UnsafeKeyFile(
                f"The env-state key file {path} lies in {folder}, which anyone may write (mode {stat.S_IMODE(info.st_mode):04o}, "
                f"not sticky): another user could swap the key; refused. Run chmod o-w {folder} {_FIX}."
            )


def _signature(payload: str, key: bytes) -> str:
    return hmac.new(key, payload.encode("ascii"), hashlib.sha256).hexdigest()


def encode_env_state(state: Mapping[str, Any], *, key: bytes | None = None) -> str:
    """An :meth:`Env.get_state <gem_core.env.Env.get_state>` snapshot as JSON-safe text: the pickle
    (zlib, base64) signed with ``key`` (default :func:`state_key`), so only states this user wrote load."""
    payload = base64.b64encode(zlib.compress(pickle.dumps(dict(state), protocol=pickle.HIGHEST_PROTOCOL))).decode("ascii")
    return f"{STATE_FORMAT}:{_signature(payload, key or state_key())}:{payload}"


def decode_env_state(text: str, *, key: bytes | None = None) -> dict[str, Any]:
    """The snapshot :func:`encode_env_state` encoded, for ``env.set_state``.

    A pickle can run code when loaded, so the signature is checked with ``key`` (default :func:`state_key`)
    before anything is unpickled: a state from someone else's file, or edited, is refused.

    Raises:
        ValueError: the state is unsigned, or signed with another key, or altered.
    """
    head, _, rest = text.partition(":") if isinstance(text, str) else ("", "", "")
    signature, _, payload = rest.partition(":")
    if head != STATE_FORMAT or not payload:
        raise MalformedFile(
            f"This env state is not signed (no {STATE_FORMAT!r} prefix): it comes from an older file or another "
            "tool, and unpickling it could run code. Record the episode again (record_env_states=True)."
        )
    if not hmac.compare_digest(_signature(payload, key or state_key()), signature):
        raise MalformedFile(
            "This env state's signature does not match your key: it was written with another key (another "
            "user or machine: set GEM_STATE_KEY alike on each) or altered since; it is not unpickled."
        )
    return pickle.loads(zlib.decompress(base64.b64decode(payload.encode("ascii"))))  # noqa: S301 - signed by this user


def _plain(value: Any) -> Any:
    """JSON-ready copy of an info value: numpy scalars/arrays become Python, anything else its repr."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if hasattr(value, "tolist"):  # numpy scalar or array
        return _plain(value.tolist())
    return repr(value)


def trajectory_to_record(trajectory: TokenTrajectory, *, env_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One JSON-ready dict; ``env_kwargs`` (the env's constructor overrides) make it replayable."""
    record = {name: getattr(trajectory, name) for name in _FIELDS}
    record["turn_spans"] = [list(span) for span in trajectory.turn_spans]
    record["infos"] = _plain(trajectory.infos)
    record["metrics"] = _plain(trajectory.metrics)
    # Where the images sit, not their pixels (megabytes per episode): replaying the seed gives them back.
    record["images"] = [{"turn": i.turn, "start": i.start, "num_tokens": i.num_tokens, "grid_thw": list(i.grid_thw)} for i in trajectory.images]
    return {"format": TRAJECTORY_FORMAT, "env_kwargs": dict(env_kwargs or {}), **record}


#: What each field of a record must hold (a list field: the type of its items). A file is data someone
#: else may have written: a wrong type is a ValueError naming the field, never a crash somewhere later.
_NUMBER = (int, float)
_LIST_ITEMS: dict[str, type | tuple[type, ...]] = {
    "prompt_ids": int, "response_ids": int, "loss_mask": int, "logprobs": _NUMBER, "rewards": _NUMBER,
    "observations": str, "actions": str, "infos": dict, "env_states": str, "rendered_context_ends": int,
    "generation_prompt_ids": int, "turn_spans": list, "images": dict, "token_versions": int,
}
#: The exact item types a JSON file gives each list field (no bool): a field whose items are all of them passes
#: without a look at each item.
_EXACT_ITEMS = {name: frozenset(item if isinstance(item, tuple) else (item,)) for name, item in _LIST_ITEMS.items()}
_SCALARS: dict[str, tuple[type, ...]] = {
    "env_id": (str, type(None)), "seed": (int, type(None)), "terminated": (bool,), "truncated": (bool,),
    "final_observation": (str, type(None)), "history": (str,), "metrics": (dict,), "rendered_ids": (list, type(None)),
}


#: The fields that hold token ids, and the largest id a file may hold (no vocabulary comes near it; torch's int32
#: index tensors and engines' int32 ids hold it).
_TOKEN_IDS = ("prompt_ids", "response_ids", "generation_prompt_ids", "rendered_ids")
_MAX_TOKEN_ID = 2**31 - 1


def _check_loss_mask(loss_mask: list[int], turn_spans: list[list[int]]) -> None:
    """Refuse a loss mask that is not 1 exactly on the turn spans (the sampled tokens): ``as_sequence()`` trains on
    the mask and ``as_transitions()`` on the spans, so the two views of one record would train on different tokens.
    Spans that do not fit the tokens are left to :class:`TokenTrajectory`, which names them."""
    expected = [0] * len(loss_mask)
    for start, end in turn_spans:
        if not 0 <= start <= end <= len(loss_mask):
            return
        expected[start:end] = [1] * (end - start)
    if expected != loss_mask:
        at = next(i for i, (m, e) in enumerate(zip(loss_mask, expected, strict=True)) if m != e)
        raise MalformedFile(
            f"field 'loss_mask' is {loss_mask[at]} at token {at} of the response, which is "
            f"{'inside' if expected[at] else 'outside'} the turn_spans; the mask must be 1 exactly on the turn spans "
            "(the sampled tokens)."
        )


def _check_token_versions(versions: list[int], loss_mask: list[int]) -> None:
    """Refuse a token version the session never writes: on a sampled token (mask 1) a policy version from 0, or -1
    when its turn's policy carried none; on an env or template token (mask 0) -1. A sampled -7 made a versioned
    episode read as unversioned (``oldest_version`` None, staleness 0). A length that does not match the mask is
    left to :class:`TokenTrajectory`, which names it. O(tokens), at C speed unless a version is wrong."""
    if not versions or len(versions) != len(loss_mask):
        return
    if min(versions) >= -1 and set(itertools.compress(versions, map(operator.not_, loss_mask))) <= {-1}:
        return
    at = next(i for i, (v, m) in enumerate(zip(versions, loss_mask, strict=True)) if (v < -1 if m else v != -1))
    if loss_mask[at]:
        raise MalformedFile(
            f"field 'token_versions' item {at} is {versions[at]} on a sampled token; a sampled token's version is the "
            "policy version that sampled it (from 0), or -1 when its policy carried none."
        )
    raise MalformedFile(
        f"field 'token_versions' item {at} is {versions[at]} on an env or template token; those tokens carry -1 (no "
        "policy sampled them)."
    )


def _check_images(record: Mapping[str, Any]) -> None:
    """Raise MalformedFile unless each image entry names whole numbers that fit the record: its turn, and placeholder ids
    inside ``prompt_ids + response_ids`` (else pixels and placeholders misalign, or multimodal code fails far away)."""
    size = len(record.get("prompt_ids") or []) + len(record.get("response_ids") or [])
    for n, image in enumerate(record.get("images") or []):
        where = f"field 'images' entry {n}"
        for key in ("turn", "start", "num_tokens"):
            value = image.get(key)
            if type(value) is not int or value < 0:
                raise MalformedFile(f"{where} has {key}={value!r}; expected a whole number from 0.")
        grid = image.get("grid_thw")
        if not isinstance(grid, list) or len(grid) != 3 or not all(type(x) is int and x >= 1 for x in grid):
            raise MalformedFile(f"{where} has grid_thw={grid!r}; expected 3 whole numbers from 1 ([t, h, w]).")
        if image["start"] + image["num_tokens"] > size:
            raise MalformedFile(
                f"{where} spans tokens {image['start']}..{image['start'] + image['num_tokens']}, past the record's {size} "
                "prompt and response tokens."
            )


def _check_record(record: Mapping[str, Any]) -> None:
    """Raise MalformedFile naming the first field of ``record`` that holds the wrong type (and the item, for a list),
    a token id outside 0..2**31-1, a loss mask that is not 1 exactly on the turn spans, or a token version out of range."""
    for name, types in _SCALARS.items():
        value = record.get(name)
        if name in record and (not isinstance(value, types) or (name == "seed" and isinstance(value, bool))):
            expected = " or ".join(t.__name__ for t in types)
            raise MalformedFile(f"field {name!r} is {type(value).__name__}, expected {expected}.")
    for name, item in _LIST_ITEMS.items():
        value = record.get(name, [])
        if not isinstance(value, list):
            raise MalformedFile(f"field {name!r} is {type(value).__name__}, expected a list.")
        if set(map(type, value)) <= _EXACT_ITEMS[name]:  # the usual case, at C speed
            continue
        # By index, not by value: a bad item that is None (JSON null) is still found.
        at = next((i for i, v in enumerate(value) if not isinstance(v, item) or isinstance(v, bool)), None)
        if at is not None:
            shown = "null" if value[at] is None else f"a {type(value[at]).__name__}"
            raise MalformedFile(f"field {name!r} item {at} is {shown}; expected {getattr(item, '__name__', 'number')} items.")
    # JSON true is a Python int: a bool in a number field would load as 1 (type() is exact, so bools fail).
    if any(len(span) != 2 or not all(type(x) is int for x in span) for span in record.get("turn_spans", [])):
        raise MalformedFile("field 'turn_spans' must hold [start, end] pairs of token indices.")
    if not all(type(x) is int for x in record.get("rendered_ids") or []):
        raise MalformedFile("field 'rendered_ids' must hold token ids.")
    for name in _TOKEN_IDS:  # a negative or huge id loads, then crashes in torch.tensor or an embedding lookup
        ids = record.get(name) or []
        if ids and (min(ids) < 0 or max(ids) > _MAX_TOKEN_ID):
            bad = next(i for i in ids if not 0 <= i <= _MAX_TOKEN_ID)
            raise MalformedFile(f"field {name!r} holds the token id {bad}; token ids are whole numbers from 0 to {_MAX_TOKEN_ID}.")
    if not set(record.get("loss_mask", [])) <= {0, 1}:  # a mask of 2 would weight a token twice in the loss
        raise MalformedFile("field 'loss_mask' must hold 0 or 1 per token.")
    _check_loss_mask(record.get("loss_mask", []), record.get("turn_spans", []))
    _check_token_versions(record.get("token_versions", []), record.get("loss_mask", []))
    _check_images(record)
    if not isinstance(record.get("env_kwargs", {}), dict):
        raise MalformedFile(f"field 'env_kwargs' is {type(record.get('env_kwargs')).__name__}, expected an object.")


def trajectory_from_record(record: Mapping[str, Any]) -> TokenTrajectory:
    """The trajectory a :func:`trajectory_to_record` dict holds.

    Raises:
        MalformedFile: not a trajectory record of this format version, a field (or a list field's item, null included)
            of the wrong type, or a token version out of range (below -1, or other than -1 on an env token).
        InvalidArgument: fields that do not agree (spans past the tokens, texts not one per turn, an unknown
            ``history`` or rendered fields that do not match it).
    """
    if not isinstance(record, Mapping) or record.get("format") != TRAJECTORY_FORMAT:
        found = record.get("format") if isinstance(record, Mapping) else type(record).__name__
        raise MalformedFile(f"Not a {TRAJECTORY_FORMAT!r} record (format={found!r}); write it with write_trajectories().")
    _check_record(record)
    fields = {name: record[name] for name in _FIELDS if name in record}
    fields["turn_spans"] = [tuple(span) for span in fields.get("turn_spans", [])]
    try:
        fields["images"] = [
            TrajectoryImage(turn=i["turn"], start=i["start"], num_tokens=i["num_tokens"], grid_thw=tuple(i["grid_thw"]))
            for i in fields.get("images", [])
        ]
        return TokenTrajectory(**fields)
    except (KeyError, TypeError) as exc:  # a required field missing, an image without its keys
        raise MalformedFile(f"not a complete trajectory record ({type(exc).__name__}: {exc}).") from None


def write_trajectories(
    path: str | os.PathLike,
    trajectories: Iterable[TokenTrajectory],
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    append: bool = False,
) -> int:
    """Write (or append) one JSON line per trajectory, flushed to disk; returns how many were written.

    All or nothing: if writing fails (a full disk, Ctrl-C, a trajectory that cannot be recorded), the file is as it
    was. Written in place, a failed write had emptied the file it replaced, or left a half line at the end of the
    one it appended to, which made every later read of the file stop there (:class:`MalformedFile`).
    """
    path = Path(path)
    if not append:
        with atomic_path(path) as partial:  # /dev/stdout or a FIFO is written through
            return _write_records(partial, "w", trajectories, env_kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size if path.is_file() else None
    try:
        return _write_records(path, "a", trajectories, env_kwargs)
    except BaseException:
        if size is not None:
            os.truncate(path, size)
        elif path.is_file() and not path.is_symlink():  # made by this call
            path.unlink()
        raise


def _write_records(path: Path, mode: str, trajectories: Iterable[TokenTrajectory], env_kwargs: Mapping[str, Any] | None) -> int:
    count = 0
    with path.open(mode, encoding="utf-8") as out:
        for trajectory in trajectories:
            record = trajectory_to_record(trajectory, env_kwargs=env_kwargs)
            line = json.dumps(record, ensure_ascii=False)
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (read from a \ud800 escape) that UTF-8 cannot hold
                line = json.dumps(record)  # escaped as it was read, so the file reads back the same
            out.write(line + "\n")
            count += 1
        out.flush()
        if stat.S_ISREG(os.fstat(out.fileno()).st_mode):  # a pipe or /dev/null has nothing to sync (EINVAL)
            os.fsync(out.fileno())
    return count


#: The longest line :func:`read_records` parses (bytes): a long episode with logprobs and env states is a
#: few megabytes; a line past this is refused before it is held in memory or parsed.
MAX_LINE_BYTES = 128 * 1024 * 1024

#: The JSON arrays and objects one line may hold however short it is. Each costs 60 to 200 bytes once parsed for the
#: 2 or 3 it takes in the file, so a line of ``[]`` items weighed 23 times its size (3 GiB at :data:`MAX_LINE_BYTES`);
#: a real record holds a few per turn (spans, infos). A million caps them near 200 MiB.
MAX_LINE_CONTAINERS = 1_000_000

#: Past :data:`MAX_LINE_CONTAINERS`, a line may still hold one container per this many bytes: the density of an
#: env's info holding a numpy array (one list per row, ``[0, 0], `` is 8 bytes), which the writer writes and the
#: reader must read back. A container per 6 bytes weighs about what texts and numbers do once parsed (12 times
#: their size), so only denser lines (``[]`` items, deep nesting) are refused.
BYTES_PER_CONTAINER = 6

#: Bytes of a line counted at a time once its brackets are counted exactly (a few small arrays of this size).
_COUNT_CHUNK = 1 << 22


def read_records(
    path: str | os.PathLike, *, max_line_bytes: int = MAX_LINE_BYTES, max_containers: int = MAX_LINE_CONTAINERS
) -> Iterator[dict[str, Any]]:
    """The raw records of a trajectory file (blank lines skipped); a bad line (not JSON, not an object,
    not UTF-8, nested too deeply, longer than ``max_line_bytes``, more arrays and objects than ``max_containers``
    and than one per :data:`BYTES_PER_CONTAINER` bytes) is refused naming its number.

    Raises:
        MalformedFile: a line that is not a JSON object this reader loads; the message names the file and line.
    """
    return (record for _, record in _numbered_records(path, max_line_bytes, max_containers))


def _containers(line: bytes, limit: int) -> int:
    """How many arrays and objects ``line`` opens, counted exactly only when the cheap bound passes ``limit``.

    Every ``[`` and ``{`` byte bounds it from above (a scan at memory speed). Brackets inside texts (code, JSON
    shown to a model, ``\\boxed{}``) open nothing, so a line past the limit is counted again: escapes are dropped
    (a backslash and the character after it, left to right, so ``\\\\"`` still ends a text), then each quote
    flips in or out of a text. Linear in the line whatever it holds, where a text pattern (``re``) took 20 s on
    a line of millions of short texts, and the parity is taken in chunks, so memory stays a copy of the line.
    """
    count = line.count(b"[") + line.count(b"{")
    if count <= limit:
        return count
    import numpy as np

    data = np.frombuffer(line.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=np.uint8)
    count, in_text = 0, False
    for start in range(0, data.size, _COUNT_CHUNK):
        chunk = data[start : start + _COUNT_CHUNK]
        # The count of quotes up to each byte, mod 256 (a uint8 wraps): its parity says inside a text or not.
        inside = (np.cumsum(chunk == ord('"'), dtype=np.uint8) & 1).astype(bool) ^ in_text
        count += int(np.count_nonzero(((chunk == ord("[")) | (chunk == ord("{"))) & ~inside))
        in_text = bool(inside[-1])
    return count


def _numbered_records(path: str | os.PathLike, max_line_bytes: int, max_containers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    with Path(path).open("rb") as lines:
        for number in itertools.count(1):
            line = lines.readline(max_line_bytes + 1)
            if not line:
                return
            if len(line) > max_line_bytes:
                raise MalformedFile(f"{path}:{number} is longer than {max_line_bytes} bytes; not a trajectory this reader loads.")
            if not line.strip():
                continue
            try:  # json.loads of bytes would also take UTF-16, whose quote bytes inside characters fool the count below
                text = line.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise MalformedFile(f"{path}:{number} is not UTF-8 ({exc}); trajectory files are written in UTF-8.") from None
            # Refused before parsing: json.loads would build every container first (the memory is the harm).
            limit = max(max_containers, len(line) // BYTES_PER_CONTAINER)
            containers = _containers(line, limit)
            if containers > limit:
                raise MalformedFile(
                    f"{path}:{number} holds {containers} JSON arrays and objects, more than the {limit} a trajectory record "
                    f"of its length may have ({max_containers}, or one per {BYTES_PER_CONTAINER} bytes); not a trajectory "
                    "this reader loads."
                )
            try:
                record = json.loads(text)
            except ValueError as exc:  # bad JSON, bad UTF-8, an int past Python's 4300-digit limit
                raise MalformedFile(f"{path}:{number} is not a JSON line ({exc}).") from None
            except RecursionError:
                raise MalformedFile(f"{path}:{number} is nested too deeply to be a trajectory record.") from None
            if not isinstance(record, dict):
                raise MalformedFile(f"{path}:{number} is a JSON {type(record).__name__}, not a trajectory record.")
            yield number, record


def read_trajectories(path: str | os.PathLike) -> list[TokenTrajectory]:
    """Every trajectory in a file written by :func:`write_trajectories`.

    Raises:
        MalformedFile: a line is not a trajectory record (bad JSON, another format, a field of the wrong type,
            turns that do not add up); the message names the file and line, so the bad record can be found.
    """
    trajectories = []
    for number, record in _numbered_records(path, MAX_LINE_BYTES, MAX_LINE_CONTAINERS):
        try:
            trajectories.append(trajectory_from_record(record))
        except InvalidArgument as exc:
            raise MalformedFile(f"{path}:{number}: {exc}") from None
    return trajectories


def _observation_message(trajectory: TokenTrajectory, turn: int) -> dict[str, str]:
    """The observation before action ``turn`` in the role the session rendered it: a tool result (ToolUse's native
    calls set ``info["observation_role"]``) stays a tool message, so a row is the conversation the policy saw."""
    info = trajectory.infos[turn - 1] if 0 < turn <= len(trajectory.infos) else {}
    return {"role": str(info.get("observation_role", "user")), "content": trajectory.observations[turn]}


def _messages(trajectory: TokenTrajectory, turns: int | None = None) -> list[dict[str, str]]:
    """The episode as chat messages: observation, action, observation, ... (``turns`` actions at most)."""
    actions = trajectory.actions if turns is None else trajectory.actions[:turns]
    messages = []
    for turn, action in enumerate(actions):
        if turn < len(trajectory.observations):
            messages.append(_observation_message(trajectory, turn))
        messages.append({"role": "assistant", "content": action})
    return messages


def sft_records(trajectories: Iterable[TokenTrajectory], *, min_return: float | None = None) -> list[dict[str, Any]]:
    """``{"messages": [...]}`` rows (TRL's ``SFTTrainer`` conversational format) of the episodes that
    returned at least ``min_return`` (all of them when None)."""
    return [
        {"messages": _messages(t)}
        for t in trajectories
        if t.actions and (min_return is None or t.episode_return >= min_return)
    ]


def preference_pairs(trajectories: Iterable[TokenTrajectory]) -> list[dict[str, Any]]:
    """``{"prompt", "chosen", "rejected"}`` rows (TRL's ``DPOTrainer`` conversational format).

    Episodes of the same env id and seed start from the same state; within each such group the best
    and the worst return make one pair at their first differing action (the shared turns are the
    prompt). So pairs need **several episodes of each seed** (``run_episodes(..., seeds=[s, s, s, s])``,
    or one run per policy over the same seeds), played with different actions: a group of one episode,
    or whose returns are all equal, gives no pair, and episodes without a seed or without observation texts are skipped. When no pair
    comes out of a non-empty input, a ``UserWarning`` says which of these is why.
    """
    trajectories = list(trajectories)
    groups: dict[tuple[Any, Any], list[TokenTrajectory]] = defaultdict(list)
    for t in trajectories:
        if t.actions and t.observations and t.seed is not None:  # an agent program's episode keeps no observation texts
            groups[(t.env_id, t.seed)].append(t)
    pairs = _pairs(groups)
    if not pairs and trajectories:
        warnings.warn(f"preference_pairs: no pair from {len(trajectories)} episodes: {_why_no_pairs(trajectories, groups)}", UserWarning, stacklevel=2)
    return pairs


def _why_no_pairs(trajectories: list[TokenTrajectory], groups: Mapping[tuple[Any, Any], list[TokenTrajectory]]) -> str:
    if not groups:
        return (
            f"none of the {len(trajectories)} episodes has a seed and at least one action with its observation texts (an "
            "agent program's episode keeps none); pairs compare episodes of the same seed, so play them with "
            "run_episodes(..., seeds=[...])."
        )
    if all(len(group) == 1 for group in groups.values()):
        return (
            f"one episode per (env id, seed) ({len(groups)} seeds); pairs compare episodes that start from the same "
            "state, so play several episodes of each seed (e.g. seeds=[s, s, s, s], or each policy over the same seeds)."
        )
    return (
        "every episode of a seed has the same return (or one episode's actions are a prefix of the other's); "
        "sample more varied episodes per seed (a higher temperature, or more of them)."
    )


def _pairs(groups: Mapping[tuple[Any, Any], list[TokenTrajectory]]) -> list[dict[str, Any]]:
    pairs = []
    for group in groups.values():
        best = max(group, key=lambda t: t.episode_return)
        worst = min(group, key=lambda t: t.episode_return)
        if best.episode_return == worst.episode_return:
            continue
        split = 0
        while split < min(len(best.actions), len(worst.actions)) and best.actions[split] == worst.actions[split]:
            split += 1
        if split >= min(len(best.actions), len(worst.actions)):
            continue  # one episode's actions are a prefix of the other's: no single differing turn
        prompt = _messages(best, split) + [_observation_message(best, split)]
        pairs.append(
            {
                "prompt": prompt,
                "chosen": [{"role": "assistant", "content": best.actions[split]}],
                "rejected": [{"role": "assistant", "content": worst.actions[split]}],
            }
        )
    return pairs
