"""WikiGame on a shipped offline link graph, ids ``game:WikiGame-v0[-easy|-hard]``."""

from gem_core.registry import register

_ENTRY = "gem_core.envs.wiki.wiki_game:WikiGame"

register("game:WikiGame-v0", _ENTRY, min_distance=2, max_distance=3, max_turns=8)
register("game:WikiGame-v0-easy", _ENTRY, min_distance=1, max_distance=2, max_turns=6)
register("game:WikiGame-v0-hard", _ENTRY, min_distance=4, max_distance=6, max_turns=12)
