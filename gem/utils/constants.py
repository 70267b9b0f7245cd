"""``gem.utils.constants``: GEM's constant for the observation after an episode's last step."""

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
"""What GEM's single-step envs return as the observation once the episode is over (the core's envs say
"Correct."/"Incorrect." instead; any string works, the episode has ended)."""

__all__ = ["TERMINAL_STATE"]
