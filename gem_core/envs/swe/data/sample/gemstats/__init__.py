"""A tiny statistics library: the repository of the SWE env's offline sample task (written for GEM)."""


def mean(values):
    """The arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean() of an empty sequence")
    return sum(values) / len(values)


def median(values):
    """The middle value of a non-empty sequence (the mean of the two middle values for an even length)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median() of an empty sequence")
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def clamp(value, low, high):
    """``value`` limited to the range ``[low, high]``."""
    if low > high:
        raise ValueError("clamp() needs low <= high")
    return max(low, min(value, high))
