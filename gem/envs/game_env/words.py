"""Where GEM's word games under ``import gem`` get their words.

GEM reads NLTK's ``words`` corpus (``en-basic``: about 850 common words; ``en``: about 236,000), and
downloads it at construction. Downloading is a network call this layer does not make: the corpus is
used when it is already on disk (``python -m nltk.downloader words``), so the same seed gives GEM's
secret. Otherwise the caller's ``words=`` list is used (in its order, which the seeded draws depend
on), and failing that ``gem_core``'s shipped lists: other words, so other secrets than GEM's.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from gem_core.errors import InvalidArgument

__all__ = ["load_words", "words_of_length"]


def _nltk_words(kind: str) -> list[str] | None:
    """NLTK's ``words`` corpus file ``kind`` when nltk is installed and the corpus downloaded, else None."""
    try:
        from nltk.corpus import words as corpus
    except ImportError:
        return None
    try:
        return list(corpus.words(kind))
    except LookupError:  # nltk installed, corpus not downloaded
        return None


def _shipped_words() -> list[str]:
    """``gem_core``'s shipped lists (the Wordle list and the Crosswords answers), in a fixed order."""
    data = resources.files("gem_core.envs.game").joinpath("data")
    found = data.joinpath("wordle_words.txt").read_text(encoding="utf-8").split()
    for line in data.joinpath("crossword_clues.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            found.append(line.split("\t", 1)[0])
    return list(dict.fromkeys(found))


def load_words(kind: str = "en-basic", words: Sequence[str] | None = None) -> list[str]:
    """The word list a GEM word game draws from: ``words`` when given, else NLTK's ``kind`` list when on
    disk, else ``gem_core``'s shipped words."""
    if words is not None:
        return list(words)
    return _nltk_words(kind) or _shipped_words()


def words_of_length(all_words: Sequence[str], length: int) -> list[str]:
    """GEM's candidates: lowercase alphabetic words of ``length`` letters, in the list's order.

    Raises:
        InvalidArgument: none of that length (offline without NLTK's corpus, the shipped lists hold
            mostly 5-letter words); the message says how to get some.
    """
    found = [w for w in all_words if len(w) == length and w.isalpha() and w.islower()]
    if not found:
        raise InvalidArgument(
            f"No {length}-letter words in the word list: pass words=[...] to gem.make, or install nltk and "
            "download its corpus (python -m nltk.downloader words) to draw from GEM's own list."
        )
    return found
