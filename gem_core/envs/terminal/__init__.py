"""Shell tasks in the bubblewrap sandbox with a working directory per episode, id ``terminal:Tasks-v0``
(the task drawn from the reset seed among the shipped ones; see :mod:`.terminal_env`)."""

from gem_core.registry import register

register("terminal:Tasks-v0", "gem_core.envs.terminal.terminal_env:TerminalEnv")
