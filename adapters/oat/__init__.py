"""GEM environments in oat-llm 0.2.x through its multi-turn actor (``PPOMultiTurnActor.collect_experience``).

Importing this package does not import oat (which needs vLLM and launchpad); ``GemActor`` and
``GemLearner`` are built from oat's classes on first access.
"""

from typing import TYPE_CHECKING

from gem_adapters.oat.actor import (
    BosTokenError,
    GemArgsMixin,
    GemCollector,
    OatVersionError,
    actor_class,
    check_oat_version,
    learner_class,
    tokenizer_writing_bos,
)
from gem_adapters.oat.policy import ActorPolicy
from gem_adapters.oat.transitions import oat_transitions

if TYPE_CHECKING:  # loaded by __getattr__ on first use; declared for type checkers and the API reference
    from gem_adapters.oat.actor import GemActor, GemLearner

__all__ = ["ActorPolicy", "BosTokenError", "GemActor", "GemArgsMixin", "GemCollector", "GemLearner", "OatVersionError", "actor_class",
           "check_oat_version", "learner_class", "oat_transitions", "tokenizer_writing_bos"]


def __getattr__(name: str):
    if name in ("GemActor", "GemLearner"):
        from gem_adapters.oat import actor

        return getattr(actor, name)
    raise AttributeError(f"module 'gem_adapters.oat' has no attribute {name!r}")
