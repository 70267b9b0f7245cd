"""``gem.utils.parsing``: GEM's answer extraction, the core's one (:func:`gem_core.envs.math.answer.extract_boxed`)."""

from gem_core.envs.math.answer import extract_boxed as extract_last_boxed_answer

__all__ = ["extract_last_boxed_answer"]
