"""Tower of Hanoi: move a stack of disks from peg A to peg C, one disk at a time, never a larger disk
on a smaller one.

A move is ``\\boxed{FROM TO}`` with pegs ``A``, ``B``, ``C`` (``\\boxed{A C}``; ``A->C`` also works).
Moving from an empty peg or onto a smaller disk is refused with the format penalty. The seed has no
effect on the puzzle (it is always the full stack on A); it only drives :meth:`sample_random_action`.

Rewards (dense): progress is how many of the largest disks already sit in final order at the bottom of
C, divided by the number of disks; each turn earns the rise of the best progress so far, and the
winning move earns whatever the episode has not yet been paid (``k / disks`` steps summed in float fall
short of 1.0 for 6, 7, 9, ... disks). A solved tower always returns exactly
:attr:`TowerOfHanoi.max_return` = 1.0.

Variants: ``-easy`` 3 disks, 10 turns; ``-v0`` 4 disks, 20 turns; ``-hard`` 5 disks, 40 turns (the
optimum is ``2**n - 1`` moves).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.vector.calls import check_count

PEGS = "ABC"
_MOVE = re.compile(r"^([ABC])\s*(?:->|to|,|\s)\s*([ABC])$", re.IGNORECASE)


#: The most disks: ``2**64 - 1`` moves already outlast any turn limit, and every step renders each disk.
MAX_DISKS = 64


class TowerOfHanoi(TurnBasedGame):
    #: The rewards paid this episode, summed in step order (the win pays ``max_return`` minus this).
    _paid = 0.0

    def __init__(self, disks: int = 4, max_turns: int = 20):
        """A stack of ``disks`` disks on peg A.

        Raises:
            InvalidArgument: if ``disks`` is not a whole number from 1 to :data:`MAX_DISKS`, or ``max_turns`` not one from 1.
        """
        self.disks, self.max_turns = check_count("disks", disks, most=MAX_DISKS), check_count("max_turns", max_turns)
        self.pegs: dict[str, list[int]] = {}
        self.best_settled = 0
        # The pegs as a hashable tuple, rebuilt once per move: the cached helpers below key on it, and a
        # step plus its random action read it three times.
        self._pegs_key: tuple[tuple[int, ...], ...] = ((), (), ())

    def settled(self) -> int:
        """How many of the largest disks sit, in order, at the bottom of peg C."""
        return _settled(tuple(self.pegs["C"]), self.disks)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.pegs = {"A": list(range(self.disks, 0, -1)), "B": [], "C": []}
        self.best_settled, self._paid = 0, 0.0
        self._pegs_key = self._key()
        return f"{_rules(self.disks, self.max_turns)}\n{self.render()}", {"max_turns": self.max_turns}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        match = _MOVE.match(extract_boxed(action) or "")
        problem = None
        if match is None:
            problem = "expected two pegs inside \\boxed{}, e.g. \\boxed{A C}"
        else:
            src, dst = match[1].upper(), match[2].upper()
            if src == dst:
                problem = "the two pegs must differ"
            elif not self.pegs[src]:
                problem = f"peg {src} is empty"
            elif self.pegs[dst] and self.pegs[dst][-1] < self.pegs[src][-1]:
                problem = f"disk {self.pegs[src][-1]} cannot go on the smaller disk {self.pegs[dst][-1]}"
        if problem is not None:
            return self.invalid_move(problem, out_of_turns)
        self.pegs[dst].append(self.pegs[src].pop())
        self._pegs_key = key = self._key()
        settled = _settled(key[2], self.disks)
        reward = 0.0
        if settled > self.best_settled:
            reward = self.max_return - self._paid if settled == self.disks else (settled - self.best_settled) / self.disks
            self._paid += reward
            self.best_settled = settled
        return self.end_turn(reward, out_of_turns, won=settled == self.disks)

    def _key(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.pegs["A"]), tuple(self.pegs["B"]), tuple(self.pegs["C"])

    def legal_moves(self) -> list[tuple[str, str]]:
        return list(_legal_moves(self._pegs_key))

    def sample_random_action(self) -> str:
        """A uniformly random legal move."""
        moves = _legal_moves(self._pegs_key)
        src, dst = moves[self.random_index(len(moves))]
        return f"\\boxed{{{src} {dst}}}"

    def render(self) -> str:
        """One line per peg, disks bottom to top."""
        return _render(self._pegs_key)


@functools.cache
def _rules(disks: int, max_turns: int) -> str:
    """The first observation's text before the pegs (the same for every episode of a configuration)."""
    return (
        f"Let's play Tower of Hanoi. Peg A holds {disks} disks, largest (size {disks}) at the bottom. Move "
        f"the whole tower to peg C, one top disk at a time, never putting a disk on a smaller one. A move is "
        f"\\boxed{{FROM TO}} with pegs A, B, C. You have at most {max_turns} turns. " + BOXED_HINT % "A C"
    )


# A game has at most 3**disks positions, and a step renders one, lists its moves and scores its peg C:
# all three are cached.
@functools.lru_cache(maxsize=1 << 14)
def _settled(peg_c: tuple[int, ...], disks: int) -> int:
    count = 0
    for want, have in zip(range(disks, 0, -1), peg_c, strict=False):
        if want != have:
            break
        count += 1
    return count


@functools.lru_cache(maxsize=1 << 14)
def _legal_moves(pegs: tuple[tuple[int, ...], ...]) -> tuple[tuple[str, str], ...]:
    tops = dict(zip(PEGS, (peg[-1] if peg else 0 for peg in pegs), strict=True))  # 0: empty (disks are 1..n)
    return tuple(
        (src, dst) for src in PEGS for dst in PEGS if src != dst and tops[src] and (not tops[dst] or tops[dst] > tops[src])
    )


@functools.lru_cache(maxsize=1 << 14)
def _render(pegs: tuple[tuple[int, ...], ...]) -> str:
    return "\n".join(f"{name}: {' '.join(map(str, peg)) or '-'}" for name, peg in zip(PEGS, pegs, strict=True))
