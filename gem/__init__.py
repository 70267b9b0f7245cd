"""Upstream GEM's import name (``axon-rl/gem``, ``pip install gem-llm``), so code written against it runs here.

``import gem; env = gem.make("game:GuessTheNumber-v0")`` works as in GEM's README. Every name here is a
thin layer over the one implementation in :mod:`gem_core`: :func:`make` and :func:`make_vec` take GEM's
arguments (``seed=`` as a constructor argument, ``vec_kwargs=``, ``async_mode=``, ``use_mp=``) and build
core envs; :class:`Env` is the core's env that also takes GEM's positional ``reset(seed)``. A game id GEM
defines is GEM's game (:mod:`gem.envs.game_env`: its levels, rewards and rules, and its secret for a
seeded reset), and ``make_vec`` returns GEM's vector env (:mod:`gem.vector`), so a GEM user's numbers stay
comparable. Where the core still behaves differently (no global seeding, no re-grading after an episode
ends) its behaviour holds; the README's "Coming from GEM" section lists each difference.

Like ``gem_core``, ``import gem`` stays light: envs, tools and wrappers load on first use.
"""

from gem.core import Env
from gem.envs.registration import make, make_vec, print_envs, register

__all__ = ["Env", "make", "make_vec", "print_envs", "register"]
__version__ = "0.1.0"
