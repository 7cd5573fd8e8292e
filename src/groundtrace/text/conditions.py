"""Words that bound or negate a statement, per language: what a dropped condition or a flipped negation changes.

"Delivery is free for orders over €50" bounds "free"; "only on «отлично»" restricts; "如果…才" conditions. A claim
that drops the condition its evidence states, or negates what its evidence affirms, reads alike to word overlap.
"""

from __future__ import annotations

import re

CONDITION = {
    "en": re.compile(r"\b(?:if|unless|provided|as long as|except|only|when|after|before|until|over|under|above|"
                     r"below|at least|at most|up to|no more than|more than|less than|within|subject to|require[sd]?)\b",
                     re.IGNORECASE),
    "ru": re.compile(r"(?<![^\W\d_])(?:если|при|кроме|исключением|только|лишь|после|до|свыше|более|менее|не более|"
                     r"не менее|не позднее|не ранее|в течение|при условии|требуется|нужно|необходимо)(?![^\W\d_])",
                     re.IGNORECASE),
    "zh": re.compile(r"如果|若|须|需|必须|仅|只|除|才|以上|以下|超过|不超过|之前|之后|以内|满|凡"),
}
NEGATION = {
    "en": re.compile(r"\b(?:not|no|never|none|nor|without|cannot)\b|n't\b", re.IGNORECASE),
    "ru": re.compile(r"(?<![^\W\d_])(?:не|нет|ни|никогда|нельзя|без)(?![^\W\d_])", re.IGNORECASE),
    "zh": re.compile(r"不|没|未|无|非|别|勿|禁止"),
}


def conditions(text: str, language: str) -> int:
    """How many condition or bound words ``text`` holds."""
    return len(CONDITION.get(language, CONDITION["en"]).findall(text))


def negations(text: str, language: str) -> int:
    """How many negations ``text`` holds."""
    return len(NEGATION.get(language, NEGATION["en"]).findall(text))
