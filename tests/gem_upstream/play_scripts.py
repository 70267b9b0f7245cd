"""Play scripted episodes with whichever ``gem`` the running interpreter imports; print them as JSON.

Run by ``test_side_by_side.py`` twice: under GEM's released package (its own virtualenv, since both
packages are named ``gem``) and under this project's. Reads ``[{"id", "seed", "actions"}, ...]`` on
stdin; writes one record per episode: the reset's observation and info, then each step's full result,
stopping at the end of the episode. An error is recorded, not raised, so both sides can be compared.

An episode may carry ``"words"``: the word list both sides' word games draw from. GEM downloads NLTK's
corpus at construction (no network here), so under GEM only that corpus is replaced by the list
(``nltk.download`` a no-op, ``nltk.corpus.words.words`` returning it); this project's games get it as
``words=``, which GEM's constructors ignore. Likewise ``"clues"``: GEM-shaped Crosswords records, read
by GEM's Crosswords in place of its clue file and passed to this project's as ``clues=``.
"""

import json
import sys


def use_word_list(words):
    """Make NLTK's ``words`` corpus, where installed, answer with ``words`` (GEM's word source)."""
    try:
        import nltk
        from nltk.corpus import words as corpus
    except ImportError:  # this project's side: its games take words= instead
        return
    nltk.download = lambda *args, **kwargs: True
    corpus.words = lambda *args, **kwargs: list(words)  # an instance attribute: the lazy loader never loads


def use_clue_records(records):
    """Make GEM's Crosswords, where it is GEM's, read ``records`` instead of its clue file.

    GEM's module imports pandas only to read that file (pandas is not in GEM's dependencies): a stand-in
    module lets it import, and its loader keeps the records of the level, as GEM's does.
    """
    try:
        import gem_core  # noqa: F401  (this project's side: its Crosswords takes clues= instead)
        return
    except ImportError:
        pass
    import types

    sys.modules.setdefault("pandas", types.ModuleType("pandas"))
    from gem.envs.game_env.crosswords import crosswords

    def load(self, words_path=None, hardcore=False):
        self.word_data = [r for r in records if r["hardcore"] == hardcore]
        if not self.word_data:
            raise ValueError(f"No words found matching hardcore={hardcore} criteria.")

    crosswords.CrosswordsEnv._load_words = load


def play(env_id, seed, actions, envs, words=None, clues=None):
    import gem

    record = {"id": env_id, "seed": seed}
    try:
        # one env per id, reset with each episode's seed: building some envs draws a whole episode
        env = envs[env_id] if env_id in envs else envs.setdefault(env_id, gem.make(env_id, **({"words": words} if words else {}),
                                                                           **({"clues": clues} if clues else {})))
        observation, info = env.reset(seed=seed)
        record["reset"] = [observation, info]
        steps = record["steps"] = []
        for action in actions:
            observation, reward, terminated, truncated, info = env.step(action)
            steps.append([action, observation, float(reward), bool(terminated), bool(truncated), info])
            if terminated or truncated:
                break
    except Exception as exc:  # compared like any other outcome
        record["error"] = type(exc).__name__
    return record


def main():
    episodes = json.load(sys.stdin)
    envs = {}
    word_lists = {tuple(e["words"]) for e in episodes if e.get("words")}
    assert len(word_lists) <= 1, "one word list per run: NLTK's corpus is patched once"
    if word_lists:
        use_word_list(next(iter(word_lists)))
    clue_sets = [e["clues"] for e in episodes if e.get("clues")]
    if clue_sets:
        assert all(c == clue_sets[0] for c in clue_sets), "one clue list per run: GEM's loader is patched once"
        use_clue_records(clue_sets[0])
    json.dump([play(e["id"], e["seed"], e["actions"], envs, e.get("words"), e.get("clues")) for e in episodes], sys.stdout)


if __name__ == "__main__":
    main()
