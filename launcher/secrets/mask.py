"""Replace secret values in text with ****: one routine for every place logs pass."""

from __future__ import annotations

import re
from collections.abc import Iterable

from launcher.secrets.kinds import MASK, MIN_MASK_LEN


class Masker:
    def __init__(self, values: Iterable[str]):
        vals = sorted({v for v in values if v and len(v) >= MIN_MASK_LEN}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in vals)) if vals else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def mask(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)
