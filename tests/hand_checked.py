"""Records whose `lexical` scores are worked out by hand, shared by the tests of the entry points that run
a metric somewhere else (files in every layout, the CI gate, pandas, LangSmith, MLflow, pytest).

lexical = (0.6·B + 0.4·J)·(1 − P), B the mean sentence BLEU over the contexts, J the share of the answer's
keywords found in them, P the share not found (metrics/lexical.py):

- COPY against [CONTEXT]: BLEU 1, every keyword found: 1.0, not flagged (threshold 0.4);
- COPY against [CONTEXT, OTHER]: BLEU 1 and 0 (B = 0.5), every keyword found: 0.7, not flagged;
- ZEBRAS against [CONTEXT]: no word in common (B = 0) and none of its keywords (gallop, savannas,
  zebras; "quickly" and "across" are stop words) in the context (J = 0, P = 1): 0.0, flagged, with the
  three keywords as its spans.
"""

from __future__ import annotations

CONTEXT = "The library opens at nine every morning."
OTHER = "It closes at six."
COPY = CONTEXT
ZEBRAS = "Zebras gallop quickly across savannas."
COPY_REASON = "grounding 1.00: 100% of the answer's keywords occur in the contexts, BLEU 1.00"
ZEBRAS_REASON = ("grounding 0.00: 0% of the answer's keywords occur in the contexts, BLEU 0.00; 3 keyword(s) not "
                 "found in any context: gallop, savannas, zebras")
ZEBRAS_SPANS = [{"start": 0, "end": 6, "text": "Zebras", "label": "unexpected word"},
                {"start": 7, "end": 13, "text": "gallop", "label": "unexpected word"},
                {"start": 29, "end": 37, "text": "savannas", "label": "unexpected word"}]
