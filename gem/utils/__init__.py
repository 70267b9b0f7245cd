"""``gem.utils``: the helpers GEM's examples import (``debug.run_and_print_episode``,
``constants.TERMINAL_STATE``/``LanguageGameReward``, ``parsing.extract_last_boxed_answer`` and GEM's other
extractors)."""
