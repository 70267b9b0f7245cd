"""Self-play games for several seats, ids ``multi:<Name>-v0`` (each a :class:`gem_core.multi_agent.MultiAgentEnv`;
play them with :func:`gem_core.rollout.self_play.run_self_play`)."""

from gem_core.registry import register

register("multi:TicTacToe-v0", "gem_core.envs.multi_agent.tic_tac_toe:TicTacToe", max_invalid=3)
register("multi:Password-v0", "gem_core.envs.multi_agent.password:Password", max_rounds=3, max_invalid=3)
