"""A "grader change" for the re-scoring tests (gem replay, gem eval --rescore): one env whose rewards
differ from the registered one's on known turns."""

from gem_core.envs.game.guess_the_number import GuessTheNumber


class OneOffGuessTheNumber(GuessTheNumber):
    """GuessTheNumber where a guess one off the number wins too."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        guess = self.guesses[-1] if self.guesses and not info.get("format_error") else None
        if not terminated and guess is not None and abs(guess - self.target) == 1:
            return "Close enough!", 1.0, True, False, {"success": True}
        return obs, reward, terminated, truncated, info
