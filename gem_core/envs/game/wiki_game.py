"""WikiGame: get from one encyclopedia page to another by following links, offline.

Each turn the agent sees the current page (title, summary, its outgoing links) and the target, and
answers with the title of one link in ``\\boxed{}``. The link graph ships with the package
(``data/wiki_links.tsv``, about 125 pages), so the game plays without a network; pass ``graph_file=`` to
play on a bigger export in the same format. Episodes are drawn so that the target is reachable in
exactly ``min_distance .. max_distance`` clicks (breadth-first distances over the graph).

Rewards: 1.0 on reaching the target (the episode ends); 0.0 for a valid click; the format penalty for
anything that is not one of the current page's links (the turn still counts). The most an episode
can return is 1.0.
"""

from __future__ import annotations

import functools
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gem_core.env import StepResult
from gem_core.envs.game.action_format import BOXED_HINT, extract_boxed
from gem_core.envs.game.turn_based import TurnBasedGame
from gem_core.errors import InvalidArgument, InvalidArgumentType, MissingFile
from gem_core.vector.calls import check_count

__all__ = ["LinkGraph", "WikiGame", "load_link_graph"]

DEFAULT_GRAPH = Path(__file__).with_name("data") / "wiki_links.tsv"


@dataclass(frozen=True)
class LinkGraph:
    """Pages, their one-line summaries and outgoing links (only links to pages in the graph are kept)."""

    summaries: dict[str, str]
    links: dict[str, tuple[str, ...]]

    def distances_from(self, start: str) -> dict[str, int]:
        """Clicks from ``start`` to every page reachable from it."""
        distance = {start: 0}
        queue = deque([start])
        while queue:
            page = queue.popleft()
            for nxt in self.links[page]:
                if nxt not in distance:
                    distance[nxt] = distance[page] + 1
                    queue.append(nxt)
        return distance

    def shortest_path(self, start: str, target: str) -> list[str] | None:
        """One shortest list of pages from ``start`` to ``target`` (both included), or None."""
        parent: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            page = queue.popleft()
            if page == target:
                path = [page]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])  # type: ignore[arg-type]
                return path[::-1]
            for nxt in self.links[page]:
                if nxt not in parent:
                    parent[nxt] = page
                    queue.append(nxt)
        return None


@functools.lru_cache(maxsize=8)
def load_link_graph(path: str | Path = DEFAULT_GRAPH) -> LinkGraph:
    """Read a ``title<TAB>summary<TAB>link; link; ...`` file (``#`` lines are comments), once per process.

    Raises:
        InvalidArgument: if the file cannot be read as UTF-8 text, or a line does not have three tab-separated
            fields.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        why = f"it is not UTF-8 ({exc.reason} at byte {exc.start})" if isinstance(exc, UnicodeDecodeError) else f"it cannot be read ({exc})"
        raise InvalidArgument(
            f"graph_file={str(path)!r}: {why}; give a UTF-8 text file of 'title<TAB>summary<TAB>links' lines "
            "(links separated by ';'), or leave graph_file out for the shipped graph."
        ) from exc
    summaries: dict[str, str] = {}
    raw_links: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InvalidArgument(f"{path}:{number}: expected 'title<TAB>summary<TAB>links', got {len(parts)} fields.")
        title, summary, link_field = (part.strip() for part in parts)
        summaries[title] = summary
        raw_links[title] = [link.strip() for link in link_field.split(";") if link.strip()]
    links = {title: tuple(dict.fromkeys(link for link in raw if link in summaries and link != title)) for title, raw in raw_links.items()}
    return LinkGraph(summaries=summaries, links=links)


class WikiGame(TurnBasedGame):
    """Reach ``target`` from ``start`` by clicking links. See the module docstring.

    Args:
        min_distance: the fewest clicks (shortest path) the episode's target may be away.
        max_distance: the most clicks (shortest path) the episode's target may be away.
        max_turns: clicks allowed (the episode is truncated after the last).
        graph_file: a link graph in the shipped format (default: the shipped graph).

    Raises:
        InvalidArgument: if a distance or ``max_turns`` is not a whole number from 1, the distance range is
            inverted, no page pair of the graph lies in it, ``max_turns`` is shorter than ``max_distance``, or
            ``graph_file`` cannot be read as UTF-8 ``title<TAB>summary<TAB>links`` lines.
        InvalidArgumentType: if ``graph_file`` is not a path.
        MissingFile: if ``graph_file`` names no existing file.
    """

    def __init__(self, min_distance: int = 2, max_distance: int = 3, max_turns: int = 8, graph_file: str | None = None):
        if check_count("min_distance", min_distance) > check_count("max_distance", max_distance):
            raise InvalidArgument(f"Need 1 <= min_distance <= max_distance, got {min_distance} and {max_distance}.")
        if check_count("max_turns", max_turns) < max_distance:
            raise InvalidArgument(f"max_turns ({max_turns}) must allow the longest shortest path ({max_distance} clicks).")
        if graph_file is not None and not isinstance(graph_file, (str, os.PathLike)):
            raise InvalidArgumentType(f"graph_file must be a file path (str), got {type(graph_file).__name__} {graph_file!r:.60}.")
        if graph_file is not None and not Path(graph_file).is_file():
            raise MissingFile(f"graph_file={str(graph_file)!r} is not an existing file; give a 'title<TAB>summary<TAB>links' "
                              "file, or leave graph_file out for the shipped graph.")
        self.min_distance, self.max_distance, self.max_turns = min_distance, max_distance, max_turns
        self.graph = load_link_graph(graph_file or DEFAULT_GRAPH)
        self.pairs = sorted(
            (start, target)
            for start in self.graph.summaries
            for target, distance in self.graph.distances_from(start).items()
            if min_distance <= distance <= max_distance
        )
        if not self.pairs:
            raise InvalidArgument(f"No page pair of the graph is {min_distance}-{max_distance} clicks apart; widen the range.")
        self.start = self.target = self.page = ""
        self.path: list[str] = []

    #: The graph and the list of playable pairs are fixed by the constructor; a snapshot keeps the page.
    state_excludes = frozenset({"graph", "pairs"})

    def _page_text(self) -> str:
        links = ", ".join(self.graph.links[self.page]) or "(no links: a dead end)"
        return f"You are on '{self.page}': {self.graph.summaries[self.page]}\nLinks: {links}"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.start, self.target = self.pairs[int(self.np_random.integers(len(self.pairs)))]
        self.page, self.path = self.start, [self.start]
        intro = (
            f"WikiGame: get from '{self.start}' to '{self.target}' by following links, in at most {self.max_turns} clicks. "
            f"Each turn, pick one link of the current page. {BOXED_HINT % self.graph.links[self.page][0]}\n"
        )
        return intro + self._page_text(), {"start": self.start, "target": self.target}

    def step(self, action: str) -> StepResult:
        out_of_turns = self.take_turn()
        choice = extract_boxed(action)
        # Titles are matched without regard to case: the model's capitalisation is not the skill tested.
        by_name = {link.casefold(): link for link in self.graph.links[self.page]}
        link = by_name.get(choice.casefold()) if choice is not None else None
        if link is None:
            return self.invalid_action(
                f"Invalid move: put the exact title of one link of '{self.page}' inside \\boxed{{}}. "
                f"Clicks left: {self.max_turns - self.turn}.\n{self._page_text()}",
                truncated=out_of_turns,
            )
        self.page = link
        self.path.append(link)
        if link == self.target:
            return f"You reached '{self.target}' in {self.turn} clicks.", 1.0, True, False, {"success": True, "path": list(self.path)}
        if out_of_turns:
            return f"Out of clicks on '{self.page}'; the target was '{self.target}'.", 0.0, False, True, {"success": False}
        return f"Clicks left: {self.max_turns - self.turn}. Target: '{self.target}'.\n{self._page_text()}", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        links = self.graph.links[self.page] if self.page else ("?",)
        return f"\\boxed{{{links[int(self.np_random.integers(len(links)))]}}}"

    def render(self) -> str:
        return f"WikiGame {' -> '.join(self.path)} (target {self.target}, click {self.turn}/{self.max_turns})"
