"""The ``grounding`` layer's check of an answer's "Yes" / "No" against the context.

An answer opening with "Yes" (or "Correct", "Right") adopts the premise of the user's
question (:func:`gateway.text.premise.premise_of`); one opening with "No" (or "Not
really:", "He didn't:") denies it. The premise is checked like an answer sentence,
*without* the question as support:

- "Yes" to a premise the context contradicts (a value, date or name it states
  otherwise there, or the opposite polarity: "Does the T-750 have brakes?" over "an
  unbraked trailer") makes the answer's first sentence contradicted — the answer
  accepted a false premise;
- "No" to a premise the context states exactly (every word, value and name found, no
  flip) makes it contradicted too.

Anything in between (a premise the context neither states nor contradicts) is left
alone: the rest of the answer is checked on its own as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.layers._grounding_sentence import SentenceCheck, check_sentence
from gateway.text.index import TextIndex
from gateway.text.polarity import leading_particle
from gateway.text.premise import premise_of
from gateway.text.stem import stem
from gateway.text.tokens import content_words, tokenize

if TYPE_CHECKING:
    from gateway.layers.grounding import GroundingConfig

__all__ = ["check_stance"]


def check_stance(first: SentenceCheck, question: str, ctx: TextIndex,
                 cfg: GroundingConfig) -> str | None:
    """Why the answer's opening "Yes"/"No" contradicts the context, else ``None``."""
    stance, _ = leading_particle(first.text)
    if stance is None:
        return None
    premise = premise_of(question)
    if premise is None:
        return None
    got = check_sentence(premise, ctx, None, cfg, opinions=False)
    if stance == "yes" and got.status == "contradicted":
        return f"affirms the question's premise \"{premise[:80]}\", which the context contradicts"
    if stance == "no" and _stated(got) and _one_sentence(premise, ctx):
        return f"denies the question's premise \"{premise[:80]}\", which the context states"
    return None


def _one_sentence(premise: str, ctx: TextIndex) -> bool:
    """Every content word of the premise is in its single best-matching context sentence."""
    words = content_words(tokenize(premise))
    best = ctx.best_matches(words, 1) if words else []
    if not best:
        return False
    have = {stem(t) for t in ctx.sentences[best[0].sentence].tokens}
    return all(stem(w) in have for w in words)


def _stated(c: SentenceCheck) -> bool:
    """The premise is stated by the context: every word near its best match, every
    value and name found, no flip."""
    return (c.status == "supported" and c.weight >= 2 and not c.unsupported_words
            and not c.distant_words and not c.unsupported_entities
            and not c.unsupported_values and not c.negation_flip
            and all(f.status == "supported" for f in c.facts or ()))
