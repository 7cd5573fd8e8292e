"""Public human-labelled grounding sets (summaries, dialogue replies, long answers, claims) converted to
the record shape of ../shared/data: one module per source, build.py runs them all."""
