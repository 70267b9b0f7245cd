"""Returns and advantages over per-turn rewards (numpy only, no torch).

Frameworks that collapse an episode into one scalar lose per-turn credit. These functions keep it:

- :func:`discounted_returns`: ``G_t = r_t + gamma * G_{t+1}`` for one episode;
- :func:`return_batch_normalize` (ReBN): per-turn returns normalized over the batch of transitions,
  the advantage of REINFORCE with Return Batch Normalization;
- :func:`grpo_advantages`: episode returns normalized within groups of rollouts of the same prompt;
- :func:`turn_level_gae`: GAE where a step is a turn, given per-turn value estimates;
- :func:`turn_to_token_advantages`: spread per-turn advantages over each turn's sampled tokens;
- :func:`turn_returns_to_token_advantages`: a batch's per-turn returns, ReBN-normalized over the batch (or left
  as they are), on each episode's turn tokens: the ``(batch, length)`` advantages of per-turn REINFORCE.
"""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from gem_core.errors import InvalidArgument

__all__ = [
    "discounted_returns",
    "grpo_advantages",
    "return_batch_normalize",
    "same_state_advantages",
    "turn_level_gae",
    "turn_returns_to_token_advantages",
    "turn_to_token_advantages",
]


def _check_gamma(name: str, value: float) -> float:
    """``value`` as a float, refused unless it is one real number in [0, 1] (not text, None, a bool or an array)."""
    try:
        number = float(check_finite(name, value, ndim=0))
    except InvalidArgument:
        number = math.nan
    if not 0.0 <= number <= 1.0:
        raise InvalidArgument(f"{name} must be a number in [0, 1], got {reprlib.repr(value)}.")
    return number


_KINDS = {0: "a finite number", 1: "one episode's values (a 1-D sequence of numbers)"}
#: numpy dtype kinds that are not real numbers, and what to call them. ``np.asarray(..., dtype=float64)`` would parse
#: text ('1e3' -> 1000.0), drop a complex number's imaginary part and read a bool as 0 or 1.
_NOT_REAL = {"b": "bool", "c": "complex", "U": "text", "S": "bytes", "M": "datetime", "m": "timedelta", "V": "raw bytes"}


def check_finite(name: str, values: ArrayLike, ndim: int | None = None) -> np.ndarray:
    """``values`` as a float64 array, refused with a ValueError naming ``name`` and the first bad position when
    not numbers, not finite (NaN, inf, None), or not ``ndim``-dimensional (0: one number, 1: one episode).
    Text, complex numbers and bools are refused, not converted ('1e3' is not read as 1000.0).

    One NaN would otherwise turn a whole batch's normalized advantages into NaN.
    """
    try:
        arr = np.asarray(values)
        kind = arr.dtype.kind
        not_real = _NOT_REAL.get(kind) or (_not_real_item(arr) if kind == "O" else None)
        if not_real is None:
            arr = arr.astype(np.float64, copy=False)  # an object array: None becomes NaN, refused below by position
    except (TypeError, ValueError, OverflowError):  # ragged, not numbers, an int past the float range
        raise InvalidArgument(f"{name} must be finite numbers, got {reprlib.repr(values)}.") from None
    if not_real is not None:
        must = "a finite number" if arr.ndim == 0 else "finite numbers"
        raise InvalidArgument(f"{name} must be {must}, got {reprlib.repr(values)} ({not_real}); pass ints or floats.")
    if ndim is not None and (arr.ndim != ndim or values is None):
        got = reprlib.repr(values) if arr.ndim == 0 or values is None else f"shape {arr.shape}"
        raise InvalidArgument(f"{name} must be {_KINDS[ndim]}, got {got}.")
    finite = np.isfinite(arr)
    if not finite.all():
        where = np.unravel_index(int(np.argmin(finite)), arr.shape)
        shown = values
        try:  # the caller's own item (None stays None), else the array's
            for i in where:
                shown = shown[i]
        except Exception:  # noqa: BLE001 - any container that cannot be indexed like the array
            shown = arr[where]
        position = name + "".join(f"[{i}]" for i in where)
        must = "a finite number" if arr.ndim == 0 else "finite numbers"
        raise InvalidArgument(f"{position} is {shown}: {name} must be {must}.")
    return arr


def _not_real_item(arr: np.ndarray) -> str | None:
    """The type name of the first item of object array ``arr`` that is not a real number (None passes: a NaN mark)."""
    for item in arr.flat:
        if isinstance(item, (str, bytes, bool, np.bool_)) or (isinstance(item, numbers.Complex) and not isinstance(item, numbers.Real)):
            return type(item).__name__
    return None


def _check_eps(eps: float) -> float:
    number = float(check_finite("eps", eps, ndim=0))
    if number < 0:
        raise InvalidArgument(f"eps must be a finite number >= 0, got {eps}.")
    return number


#: Largest magnitudes of a batch whose mean, squares and std stay normal floats (no overflow to inf, no underflow to
#: 0): such a batch is normalized as it is; another is divided by its largest magnitude first (:func:`_magnitude`).
_PLAIN = (1e-100, 1e100)


def _magnitude(largest: float) -> float:
    """What to divide values whose largest magnitude is ``largest`` by before normalizing them: 1 inside :data:`_PLAIN`.

    ``(g - mean(g)) / (std(g) + eps) == (s - mean(s)) / (std(s) + eps / m)`` with ``s = g / m``: with ``m`` the largest
    magnitude, ``s`` lies in [-1, 1], where the mean and the squares cannot overflow (NaN, or zeros) nor the std of
    distinct values underflow to 0 (inf with ``eps=0``).
    """
    return 1.0 if _PLAIN[0] <= largest <= _PLAIN[1] or largest == 0 else largest


def _unscaled(name: str, centered: np.ndarray, magnitude: float | np.ndarray) -> np.ndarray:
    """``centered * magnitude``: the centered values themselves, refused when they pass the largest float."""
    with np.errstate(over="ignore"):
        out = centered * magnitude
    if not np.isfinite(out).all():
        raise InvalidArgument(
            f"{name} overflow float64 once their mean is subtracted (a difference passes {np.finfo(np.float64).max:.4g}); "
            f"scale the {name} down, or keep scale=True."
        )
    return out


def discounted_returns(rewards: ArrayLike, gamma: float) -> np.ndarray:
    """Per-turn discounted returns of one episode: ``G_t = r_t + gamma * G_{t+1}``, ``G_T = 0``.

    ``gamma = 0`` gives the rewards themselves; ``gamma = 1`` gives reward-to-go sums. ``rewards`` is one
    episode (1-D, finite); a batch of episodes is refused (its returns would leak across episodes).

    Raises:
        InvalidArgument: ``gamma`` is not a number in [0, 1], ``rewards`` are not one episode of finite real
            numbers, or a return would pass the largest float.
    """
    gamma = _check_gamma("gamma", gamma)
    r = check_finite("rewards", rewards, ndim=1)
    returns = []
    running = 0.0
    for reward in reversed(r.tolist()):  # Python floats: an overflow gives inf, refused below, without a warning
        running = reward + gamma * running
        returns.append(running)
    if not math.isfinite(running):  # once a return overflows, every earlier one is inf (or NaN) too
        raise InvalidArgument(
            f"rewards {reprlib.repr(rewards)} overflow float64: a discounted sum passes {np.finfo(np.float64).max:.4g}; "
            "scale the rewards down."
        )
    return np.array(returns[::-1], dtype=np.float64)


def return_batch_normalize(returns: ArrayLike, eps: float = 1e-8, scale: bool = True) -> np.ndarray:
    """Return Batch Normalization: ``(G - mean(G)) / (std(G) + eps)`` over a flat batch of transitions.

    ``std`` is the population standard deviation (``ddof=0``) of the whole batch, pooled across
    episodes. Degenerate batches give zeros: a single transition, and a batch whose returns are all
    equal (std 0), carry no signal about which action was better, so no update. ``scale=False`` keeps
    only the baseline, ``G - mean(G)`` (as ``grpo_advantages``' ``scale``): the ablation that tells the
    baseline's effect from the division's. Returns must be finite and ``eps >= 0`` (0 is safe: the
    division only happens when ``std + eps > 0``). Returns of any finite size normalize alike (1e-200 or 1e308);
    with ``scale=False``, centered returns past the largest float are refused.

    Raises:
        InvalidArgument: a return is not a finite number, ``eps`` is negative, or (``scale=False``) a centered return
            overflows float64.
    """
    eps = _check_eps(eps)
    g = check_finite("returns", returns).reshape(-1)
    if g.size <= 1 or np.all(g == g[0]):
        return np.zeros_like(g)
    m = _magnitude(float(np.abs(g).max()))
    s = g / m if m != 1.0 else g
    centered = s - s.mean()
    if not scale:
        return centered if m == 1.0 else _unscaled("returns", centered, m)
    denominator = float(s.std()) + eps / m  # Python floats: eps / m of a tiny m is inf (advantages 0), no warning
    return centered / denominator if denominator > 0 else np.zeros_like(g)


def grpo_advantages(
    returns: ArrayLike, group_ids: Sequence[Hashable], eps: float = 1e-4, scale: bool = True
) -> np.ndarray:
    """GRPO advantages: each episode return minus its group's mean, over the group's std when ``scale``.

    Groups are rollouts of the same prompt (same ``group_ids`` value; ids may be any hashable and
    need not be contiguous). ``std`` is the sample standard deviation (``ddof=1``, as TRL and verl
    compute it with ``torch.std``). A group of one has advantage 0; a group whose returns are all equal
    has advantage 0 (centered values are exactly 0). Returns must be finite and ``eps >= 0`` (0 is safe: a
    group is divided only when ``std + eps > 0``); returns of any finite size normalize alike, as in
    :func:`return_batch_normalize`.

    Raises:
        InvalidArgument: if ``returns`` and ``group_ids`` differ in length, a return is not finite or ``eps`` is
            negative, or (``scale=False``) a centered return overflows float64.
    """
    eps = _check_eps(eps)
    r = check_finite("returns", returns).reshape(-1)
    if len(group_ids) != r.size:
        raise InvalidArgument(f"Got {r.size} returns but {len(group_ids)} group ids; need one group id per return.")
    if r.size == 0:
        return np.zeros_like(r)
    index: dict[Hashable, int] = {}
    group = np.fromiter((index.setdefault(g, len(index)) for g in group_ids), dtype=np.intp, count=r.size)
    k = len(index)
    low, high, largest = np.full(k, np.inf), np.full(k, -np.inf), np.zeros(k)
    np.minimum.at(low, group, r)
    np.maximum.at(high, group, r)
    np.maximum.at(largest, group, np.abs(r))
    signal = low < high  # a group of one, or whose returns are all equal, has none: its advantages are exactly 0
    m = np.where(((largest >= _PLAIN[0]) & (largest <= _PLAIN[1])) | (largest == 0), 1.0, largest)  # _magnitude per group
    s = r / m[group]
    counts = np.bincount(group, minlength=k)
    mean = np.bincount(group, weights=s, minlength=k) / counts
    centered = np.where(signal[group], s - mean[group], 0.0)
    if not scale:
        return _unscaled("returns", centered, m[group])
    std = np.sqrt(np.bincount(group, weights=centered * centered, minlength=k) / np.maximum(counts - 1, 1))
    with np.errstate(over="ignore"):
        denominator = std + eps / m  # eps / m of a tiny m is inf: advantages 0
    return centered / np.where(denominator > 0, denominator, 1.0)[group]  # 0 where no signal: centered is 0 there


def same_state_advantages(
    branch_rewards: Sequence[ArrayLike], fork_turn: int, gamma: float, *, scale: bool = False, eps: float = 1e-4
) -> list[np.ndarray]:
    """Per-turn advantages of a same-state turn group (branches forked at turn ``fork_turn``).

    Every branch acted from the same state at ``fork_turn``, so their discounted returns from there,
    ``G_fork``, compare like with like: each branch's baseline is the group's mean ``G_fork`` (GRPO's
    group baseline, :func:`grpo_advantages`, moved from the prompt to a mid-episode state). Turns from
    the fork on get ``G_fork - mean`` (over the group's std when ``scale``); the shared turns before it
    get 0, since the group says nothing about them.

    Every branch must have played the fork turn (``len(branch_rewards[b]) > fork_turn``): a branch without
    it has no ``G_fork`` to compare, and counting it as 0 would bias the baseline.

    Raises:
        InvalidArgument: if ``fork_turn`` is not an int >= 0, ``gamma`` not a number in [0, 1], or a branch did not
            play the fork turn.
    """
    if isinstance(fork_turn, bool) or not isinstance(fork_turn, (int, np.integer)) or fork_turn < 0:
        raise InvalidArgument(f"fork_turn must be an int >= 0, got {fork_turn!r}.")
    gamma = _check_gamma("gamma", gamma)  # checked even when there is no branch to discount
    rewards = [check_finite(f"branch_rewards[{b}]", r, ndim=1) for b, r in enumerate(branch_rewards)]
    for b, r in enumerate(rewards):
        if r.size <= fork_turn:
            raise InvalidArgument(
                f"branch {b} has {r.size} turns, none at fork_turn {fork_turn}: every branch must have played the fork turn."
            )
    at_fork = [discounted_returns(r, gamma)[fork_turn] for r in rewards]
    advantages = grpo_advantages(at_fork, [0] * len(rewards), eps=eps, scale=scale)
    out = []
    for r, advantage in zip(rewards, advantages, strict=True):
        per_turn = np.zeros_like(r)
        per_turn[fork_turn:] = advantage
        out.append(per_turn)
    return out


def turn_level_gae(
    rewards: ArrayLike, values: ArrayLike, gamma: float, lam: float, *, last_value: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation where a step is a turn.

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` (with ``V_T = last_value``: 0 for an episode that
    terminated, the value of the next state for one that was cut), ``A_t = delta_t + gamma * lam *
    A_{t+1}``.

    Returns:
        ``(advantages, returns)`` with ``returns = advantages + values`` (the value targets).

    Raises:
        InvalidArgument: if ``rewards`` and ``values`` differ in length, ``gamma`` or ``lam`` is not a number in
            [0, 1], or an advantage or return overflows float64.
    """
    gamma = _check_gamma("gamma", gamma)
    lam = _check_gamma("lam", lam)
    r = check_finite("rewards", rewards, ndim=1)
    v = check_finite("values", values, ndim=1)
    next_value = float(check_finite("last_value", last_value, ndim=0))
    if r.shape != v.shape:
        raise InvalidArgument(f"Got {r.size} rewards but {v.size} values; need one value per turn.")
    advantages = []
    running = 0.0
    for reward, value in zip(reversed(r.tolist()), reversed(v.tolist()), strict=True):  # Python floats: no overflow warning
        delta = reward + gamma * next_value - value
        running = delta + gamma * lam * running
        advantages.append(running)
        next_value = value
    adv = np.array(advantages[::-1], dtype=np.float64)
    with np.errstate(over="ignore"):
        targets = adv + v
    if not (np.isfinite(adv).all() and np.isfinite(targets).all()):
        raise InvalidArgument(
            f"rewards and values overflow float64: an advantage or return passes {np.finfo(np.float64).max:.4g}; "
            "scale the rewards and values down."
        )
    return adv, targets


def turn_to_token_advantages(
    turn_advantages: ArrayLike, turn_spans: Sequence[tuple[int, int]], length: int
) -> np.ndarray:
    """A per-token advantage array of ``length``: each turn's advantage on its span, 0 elsewhere.

    ``turn_spans`` are :attr:`TokenTrajectory.turn_spans` (the sampled tokens of each turn), so the
    result is non-zero only where ``loss_mask`` is 1.

    Raises:
        InvalidArgument: if there is not one advantage per span, or a span does not fit in ``length``.
    """
    a = check_finite("turn_advantages", turn_advantages).reshape(-1)
    if a.size != len(turn_spans):
        raise InvalidArgument(f"Got {a.size} turn advantages but {len(turn_spans)} turn spans; need one per turn.")
    out = np.zeros(length, dtype=np.float64)
    for value, (start, end) in zip(a, turn_spans, strict=True):
        if not 0 <= start <= end <= length:
            raise InvalidArgument(f"Turn span ({start}, {end}) does not fit in a sequence of length {length}.")
        out[start:end] = value
    return out


def turn_returns_to_token_advantages(
    turn_returns: Sequence[ArrayLike],
    turn_spans: Sequence[Sequence[tuple[int, int]]],
    length: int,
    *,
    normalize: bool = True,
    scale: bool = True,
    population: ArrayLike | None = None,
    offset: int = 0,
) -> np.ndarray:
    """``(len(turn_returns), length)`` per-token advantages of a batch of episodes, from their per-turn returns.

    Row ``i`` holds episode ``i``'s turn values on its ``turn_spans[i]`` (:func:`turn_to_token_advantages`).
    With ``normalize`` the values are the returns after :func:`return_batch_normalize` (ReBN; ``scale=False``
    subtracts the mean only) over every turn of the population; without it, the returns as they are (vanilla
    REINFORCE, or the value targets).

    The population is this batch's turns unless a batch split across processes passes ``population``, every
    turn return of the whole batch (all processes', flat, in order), and ``offset``, where this batch's turns
    start in it.

    Raises:
        InvalidArgument: if ``turn_returns`` and ``turn_spans`` differ in length, ``offset`` is not a whole number,
            or this batch's turns do not fit at ``offset`` of ``population``.
    """
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral):  # a float slices nothing; True is 1
        raise InvalidArgument(f"offset={offset!r} must be a whole number: where this batch's turns start in population.")
    returns = [check_finite(f"turn_returns[{i}]", g).reshape(-1) for i, g in enumerate(turn_returns)]
    if len(returns) != len(turn_spans):
        raise InvalidArgument(f"Got {len(returns)} episodes' returns but {len(turn_spans)} episodes' turn spans; need one of each per episode.")
    flat = np.concatenate(returns) if returns else np.zeros(0)
    if normalize:
        pool = flat if population is None else check_finite("population", population).reshape(-1)
        if not 0 <= offset <= pool.size - flat.size:
            raise InvalidArgument(f"This batch's {flat.size} turns do not fit at offset {offset} of a population of {pool.size}.")
        flat = return_batch_normalize(pool, scale=scale)[offset : offset + flat.size]
    rows = np.zeros((len(returns), length), dtype=np.float64)
    start = 0
    for row, g, spans in zip(rows, returns, turn_spans, strict=True):
        row[:] = turn_to_token_advantages(flat[start : start + g.size], spans, length)
        start += g.size
    return rows
