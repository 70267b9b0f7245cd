"""``gem.utils.constants``: GEM's constants: the observation after an episode's last step, and the reward
levels GEM's language games pay."""

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
"""What GEM's single-step envs return as the observation once the episode is over (the core's envs say
"Correct."/"Incorrect." instead; any string works, the episode has ended)."""


class LanguageGameReward:
    """gem-llm 0.1.0's reward levels for language games, read by code written for GEM (custom games that pay
    as GEM's do). Class attributes, as in GEM; the games of ``import gem`` carry their own rewards."""

    success_reward: float = 1.0
    """The task was completed."""
    internal_step_reward: float = 0.0
    """A step that does not end the game (e.g. a hint in Guess the Number)."""
    fail_reward: float = 0.0
    """The task was failed (e.g. a mine hit in Minesweeper)."""
    invalid_action_reward: float = 0.0
    """An illegal move (e.g. a guess outside the range)."""
    format_error_reward: float = -0.1
    """An action that could not be parsed."""


__all__ = ["LanguageGameReward", "TERMINAL_STATE"]
