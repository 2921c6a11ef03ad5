"""The seed tutorial's synthetic number-saying text, for trying the pipeline end to end.

Each document spells one signed number in English ("minus four hundred and twelve").
The distribution follows the seed tutorial (streaming's synthetic NLP example): mostly
positive, magnitudes skewed towards small numbers, so a tiny model learns the grammar of
number words quickly and its loss visibly falls.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = ((1_000_000, "million"), (1_000, "thousand"))


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    if n >= 100:
        words += [_ONES[n // 100], "hundred"]
        n %= 100
        if n:
            words.append("and")
    if n >= 20:
        words.append(_TENS[n // 10 - 2] + (f"-{_ONES[n % 10]}" if n % 10 else ""))
    elif n or not words:
        words.append(_ONES[n])
    return words


def say(n: int) -> str:
    """English words for an integer below one billion in magnitude: -412 -> 'minus four
    hundred and twelve'."""
    if abs(n) >= 1_000_000_000:
        raise ValueError(f"say() handles magnitudes below one billion, got {n}")
    if n < 0:
        return "minus " + say(-n)
    words: list[str] = []
    for scale, name in _SCALES:
        if n >= scale:
            words += [*_below_thousand(n // scale), name]
            n %= scale
    if n or not words:
        if words and n < 100:
            words.append("and")
        words += _below_thousand(n)
    return " ".join(words)


def random_number(rng: random.Random) -> int:
    """As in the seed: 80% positive, magnitude (10**U(1,4) - 10)**2, i.e. 0 to ~10**8."""
    sign = 1 if rng.random() < 0.8 else -1
    return sign * int((10 ** rng.uniform(1, 4) - 10) ** 2)


def _write_jsonl(path: str | Path, samples: int, seed: int, document) -> int:
    """Write `samples` JSON Lines documents, each `document(rng)` with one seeded rng; returns the count."""
    if samples < 1:
        raise ValueError("samples must be at least 1")
    rng = random.Random(seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(samples):
            f.write(json.dumps(document(rng)) + "\n")
    return samples


def _number_say(rng: random.Random) -> dict:
    n = random_number(rng)
    return {"number": n, "text": say(n)}


def write_number_say(path: str | Path, samples: int, seed: int = 0) -> int:
    """Write `samples` JSON Lines documents {"number": n, "text": words}; returns the count."""
    return _write_jsonl(path, samples, seed, _number_say)


# Sentiment: each review mixes neutral filler with words of one polarity (and, rarely, one
# of the other), so that the label is learnable from the words but not from the length.
_POSITIVE = [
    "great",
    "wonderful",
    "loved",
    "excellent",
    "brilliant",
    "delightful",
    "superb",
    "enjoyable",
    "charming",
    "moving",
    "fantastic",
    "beautiful",
]
_NEGATIVE = [
    "awful",
    "boring",
    "hated",
    "terrible",
    "dull",
    "dreadful",
    "poor",
    "tedious",
    "clumsy",
    "annoying",
    "disappointing",
    "ugly",
]
_FILLER = [
    "the",
    "film",
    "was",
    "plot",
    "acting",
    "story",
    "ending",
    "cast",
    "and",
    "it",
    "really",
    "a",
    "movie",
    "this",
    "scenes",
    "music",
    "director",
    "with",
    "quite",
    "very",
    "of",
]


def _review(rng: random.Random) -> dict:
    label = rng.choice(("positive", "negative"))
    own, other = (_POSITIVE, _NEGATIVE) if label == "positive" else (_NEGATIVE, _POSITIVE)
    words = [rng.choice(_FILLER) for _ in range(rng.randint(6, 14))]
    for _ in range(rng.randint(2, 4)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(own))
    if rng.random() < 0.15:
        words.insert(rng.randrange(len(words) + 1), rng.choice(other))
    return {"text": " ".join(words), "label": label}


def write_sentiment(path: str | Path, samples: int, seed: int = 0) -> int:
    """Write `samples` JSON Lines reviews {"text": ..., "label": "positive"|"negative"}."""
    return _write_jsonl(path, samples, seed, _review)
