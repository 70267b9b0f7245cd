"""Trajectories on disk: a lossless JSONL record per episode, and the SFT / preference views TRL reads.

Stored rollouts outlive the run that made them: a grader bug is fixed by re-scoring the stored actions
(:mod:`gem_core.rollout.replay`) instead of paying for inference again, and good episodes become
supervised or preference data. One line per :class:`TokenTrajectory`, every field kept (ids, mask,
logprobs, spans, rewards, texts, infos, and the env state before each turn when the episode recorded it),
plus the env label needed to rebuild the env. Files written before env states existed read the same,
with no states.

An env state is Python objects (an RNG, a board), so it is stored as a pickle (zlib-compressed, base64
text). Reading a file never unpickles: :func:`decode_env_state` does, on request, and like any pickle
it must only be given files you trust (a pickle can run code).
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import math
import os
import pickle
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gem_core.rollout.trajectory import TokenTrajectory
from gem_core.rollout.vision import TrajectoryImage

__all__ = [
    "TRAJECTORY_FORMAT",
    "trajectory_to_record",
    "trajectory_from_record",
    "write_trajectories",
    "read_trajectories",
    "encode_env_state",
    "decode_env_state",
    "sft_records",
    "preference_pairs",
]

TRAJECTORY_FORMAT = "gem.trajectory/1"
_FIELDS = {f.name for f in dataclasses.fields(TokenTrajectory)}


def encode_env_state(state: Mapping[str, Any]) -> str:
    """An :meth:`Env.get_state <gem_core.env.Env.get_state>` snapshot as JSON-safe text (pickle, zlib, base64)."""
    return base64.b64encode(zlib.compress(pickle.dumps(dict(state), protocol=pickle.HIGHEST_PROTOCOL))).decode("ascii")


def decode_env_state(text: str) -> dict[str, Any]:
    """The snapshot :func:`encode_env_state` encoded, for ``env.set_state``. Only for files you trust: it unpickles."""
    return pickle.loads(zlib.decompress(base64.b64decode(text.encode("ascii"))))  # noqa: S301 - documented trust


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
    "generation_prompt_ids": int, "turn_spans": list, "images": dict,
}
_SCALARS: dict[str, tuple[type, ...]] = {
    "env_id": (str, type(None)), "seed": (int, type(None)), "terminated": (bool,), "truncated": (bool,),
    "final_observation": (str, type(None)), "history": (str,), "metrics": (dict,), "rendered_ids": (list, type(None)),
}


def _check_record(record: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first field of ``record`` that holds the wrong type."""
    for name, types in _SCALARS.items():
        value = record.get(name)
        if name in record and (not isinstance(value, types) or (name == "seed" and isinstance(value, bool))):
            raise ValueError(f"field {name!r} is {type(value).__name__}, expected {' or '.join(t.__name__ for t in types)}.")
    for name, item in _LIST_ITEMS.items():
        value = record.get(name, [])
        if not isinstance(value, list):
            raise ValueError(f"field {name!r} is {type(value).__name__}, expected a list.")
        bad = next((v for v in value if not isinstance(v, item) or (item is int and isinstance(v, bool))), None)
        if bad is not None:
            raise ValueError(f"field {name!r} holds a {type(bad).__name__}; expected {getattr(item, '__name__', 'number')} items.")
    if any(len(span) != 2 or not all(isinstance(x, int) for x in span) for span in record.get("turn_spans", [])):
        raise ValueError("field 'turn_spans' must hold [start, end] pairs of token indices.")
    if not all(isinstance(x, int) for x in record.get("rendered_ids") or []):
        raise ValueError("field 'rendered_ids' must hold token ids.")
    if not isinstance(record.get("env_kwargs", {}), dict):
        raise ValueError(f"field 'env_kwargs' is {type(record.get('env_kwargs')).__name__}, expected an object.")


def trajectory_from_record(record: Mapping[str, Any]) -> TokenTrajectory:
    """The trajectory a :func:`trajectory_to_record` dict holds.

    Raises:
        ValueError: not a trajectory record of this format version, or a field of the wrong type.
    """
    if not isinstance(record, Mapping) or record.get("format") != TRAJECTORY_FORMAT:
        found = record.get("format") if isinstance(record, Mapping) else type(record).__name__
        raise ValueError(f"Not a {TRAJECTORY_FORMAT!r} record (format={found!r}); write it with write_trajectories().")
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
        raise ValueError(f"not a complete trajectory record ({type(exc).__name__}: {exc}).") from None


def write_trajectories(
    path: str | os.PathLike,
    trajectories: Iterable[TokenTrajectory],
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    append: bool = False,
) -> int:
    """Write (or append) one JSON line per trajectory, flushed to disk; returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("a" if append else "w", encoding="utf-8") as out:
        for trajectory in trajectories:
            out.write(json.dumps(trajectory_to_record(trajectory, env_kwargs=env_kwargs), ensure_ascii=False) + "\n")
            count += 1
        out.flush()
        os.fsync(out.fileno())
    return count


#: The longest line :func:`read_records` parses (bytes): a long episode with logprobs and env states is a
#: few megabytes; a line past this is refused before it is held in memory or parsed.
MAX_LINE_BYTES = 128 * 1024 * 1024


def read_records(path: str | os.PathLike, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[dict[str, Any]]:
    """The raw records of a trajectory file (blank lines skipped); a bad line (not JSON, not an object,
    nested too deeply, longer than ``max_line_bytes``) raises ValueError naming its number."""
    with Path(path).open("rb") as lines:
        for number in itertools.count(1):
            line = lines.readline(max_line_bytes + 1)
            if not line:
                return
            if len(line) > max_line_bytes:
                raise ValueError(f"{path}:{number} is longer than {max_line_bytes} bytes; not a trajectory this reader loads.")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}:{number} is not a JSON line ({exc}).") from None
            except RecursionError:
                raise ValueError(f"{path}:{number} is nested too deeply to be a trajectory record.") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number} is a JSON {type(record).__name__}, not a trajectory record (an object).")
            yield record


def read_trajectories(path: str | os.PathLike) -> list[TokenTrajectory]:
    """Every trajectory in a file written by :func:`write_trajectories`."""
    return [trajectory_from_record(record) for record in read_records(path)]


def _messages(trajectory: TokenTrajectory, turns: int | None = None) -> list[dict[str, str]]:
    """The episode as chat messages: observation, action, observation, ... (``turns`` actions at most)."""
    actions = trajectory.actions if turns is None else trajectory.actions[:turns]
    messages = []
    for turn, action in enumerate(actions):
        if turn < len(trajectory.observations):
            messages.append({"role": "user", "content": trajectory.observations[turn]})
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
    prompt). Groups whose returns are all equal give no pair.
    """
    groups: dict[tuple[Any, Any], list[TokenTrajectory]] = defaultdict(list)
    for t in trajectories:
        if t.actions and t.seed is not None:
            groups[(t.env_id, t.seed)].append(t)
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
        prompt = _messages(best, split) + [{"role": "user", "content": best.observations[split]}]
        pairs.append(
            {
                "prompt": prompt,
                "chosen": [{"role": "assistant", "content": best.actions[split]}],
                "rejected": [{"role": "assistant", "content": worst.actions[split]}],
            }
        )
    return pairs
