"""``gem.wrappers``: GEM's wrapper names (``WRAPPER_FACTORY`` in :mod:`gem.wrappers.wrapper_factory`),
each a core wrapper (:mod:`gem_core.wrappers`) under GEM's constructor."""
