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


def _check_gamma(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{name} must be in [0, 1], got {value}.")


_KINDS = {0: "a finite number", 1: "one episode's values (a 1-D sequence of numbers)"}


def check_finite(name: str, values: ArrayLike, ndim: int | None = None) -> np.ndarray:
    """``values`` as a float64 array, refused with a ValueError naming ``name`` and the first bad position when
    not numbers, not finite (NaN, inf, None), or not ``ndim``-dimensional (0: one number, 1: one episode).

    One NaN would otherwise turn a whole batch's normalized advantages into NaN.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name} must be finite numbers, got {reprlib.repr(values)}.") from None
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


def _check_eps(eps: float) -> None:
    if check_finite("eps", eps, ndim=0) < 0:
        raise InvalidArgument(f"eps must be a finite number >= 0, got {eps}.")


def discounted_returns(rewards: ArrayLike, gamma: float) -> np.ndarray:
    """Per-turn discounted returns of one episode: ``G_t = r_t + gamma * G_{t+1}``, ``G_T = 0``.

    ``gamma = 0`` gives the rewards themselves; ``gamma = 1`` gives reward-to-go sums. ``rewards`` is one
    episode (1-D, finite); a batch of episodes is refused (its returns would leak across episodes).
    """
    _check_gamma("gamma", gamma)
    r = check_finite("rewards", rewards, ndim=1)
    out = np.zeros_like(r)
    running = 0.0
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * running
        out[t] = running
    return out


def return_batch_normalize(returns: ArrayLike, eps: float = 1e-8, scale: bool = True) -> np.ndarray:
    """Return Batch Normalization: ``(G - mean(G)) / (std(G) + eps)`` over a flat batch of transitions.

    ``std`` is the population standard deviation (``ddof=0``) of the whole batch, pooled across
    episodes. Degenerate batches give zeros: a single transition, and a batch whose returns are all
    equal (std 0), carry no signal about which action was better, so no update. ``scale=False`` keeps
    only the baseline, ``G - mean(G)`` (as ``grpo_advantages``' ``scale``): the ablation that tells the
    baseline's effect from the division's. Returns must be finite and ``eps >= 0`` (0 is safe: the
    division only happens when ``std > 0``).
    """
    _check_eps(eps)
    g = check_finite("returns", returns).reshape(-1)
    if g.size <= 1 or np.all(g == g[0]):
        return np.zeros_like(g)
    centered = g - g.mean()
    return centered / (g.std() + eps) if scale else centered


def grpo_advantages(
    returns: ArrayLike, group_ids: Sequence[Hashable], eps: float = 1e-4, scale: bool = True
) -> np.ndarray:
    """GRPO advantages: each episode return minus its group's mean, over the group's std when ``scale``.

    Groups are rollouts of the same prompt (same ``group_ids`` value; ids may be any hashable and
    need not be contiguous). ``std`` is the sample standard deviation (``ddof=1``, as TRL and verl
    compute it with ``torch.std``). A group of one has advantage 0; a group whose returns are all equal
    has advantage 0 (centered values are exactly 0). Returns must be finite and ``eps >= 0``.

    Raises:
        InvalidArgument: if ``returns`` and ``group_ids`` differ in length, a return is not finite or ``eps`` is
            negative.
    """
    _check_eps(eps)
    r = check_finite("returns", returns).reshape(-1)
    if len(group_ids) != r.size:
        raise InvalidArgument(f"Got {r.size} returns but {len(group_ids)} group ids; need one group id per return.")
    out = np.zeros_like(r)
    groups: dict[Hashable, list[int]] = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(g, []).append(i)
    for members in groups.values():
        idx = np.asarray(members)
        values = r[idx]
        if np.all(values == values[0]):
            continue  # already 0: no signal within the group
        centered = values - values.mean()
        if scale:
            std = values.std(ddof=1) if values.size > 1 else 0.0
            centered = centered / (std + eps)
        out[idx] = centered
    return out


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
        InvalidArgument: if ``fork_turn`` is not an int >= 0 or a branch did not play the fork turn.
    """
    if isinstance(fork_turn, bool) or not isinstance(fork_turn, (int, np.integer)) or fork_turn < 0:
        raise InvalidArgument(f"fork_turn must be an int >= 0, got {fork_turn!r}.")
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
        InvalidArgument: if ``rewards`` and ``values`` differ in length.
    """
    _check_gamma("gamma", gamma)
    _check_gamma("lam", lam)
    r = check_finite("rewards", rewards, ndim=1)
    v = check_finite("values", values, ndim=1)
    last_value = check_finite("last_value", last_value, ndim=0)
    if r.shape != v.shape:
        raise InvalidArgument(f"Got {r.size} rewards but {v.size} values; need one value per turn.")
    adv = np.zeros_like(r)
    running = 0.0
    next_value = float(last_value)
    for t in range(len(r) - 1, -1, -1):
        delta = r[t] + gamma * next_value - v[t]
        running = delta + gamma * lam * running
        adv[t] = running
        next_value = v[t]
    return adv, adv + v


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
        InvalidArgument: if ``turn_returns`` and ``turn_spans`` differ in length, or this batch's turns do not
            fit at ``offset`` of ``population``.
    """
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
