"""An answer to a question that brings nothing from the context: all it adds is made up.

A question asked about a passage is answered by what the passage says. Whatever the
answer repeats from the question is the question's frame, not an answer; what it adds
— its *own* words, the ones the question does not have — is the answer. When the answer
adds words and **not one** of them (nor any value) is in the context, the reply fills
the asked slot with something the context does not say:

- "Noel Leung is known for her roles in *films*." (context: "known for her roles in TVB
  television");
- "… held in *Vienna*, Austria." (context: "held in … Wels");
- "… a music festival set to take place on a *deserted* Bahamian island." (context:
  "the Bahamian island of Great Exuma");
- "The Newlands Resolution was enacted in *1900*." (a value the context lacks counts
  as an own word: "When …?" answered with a year the passage does not give).

Each is a copy of the question's frame with one or two words of its own; the evidence
pooled over words (``_grounding_answer``) sees one unsupported word beside many
supported ones and the length allowance absorbs it. A faithful answer — an extracted
span ("TVB television"), a sentence that quotes the passage or a paraphrase — always
brings at least one context word or value.

Not a claim (never counted): answers that open with "Yes"/"No" or carry a negation
(the premise and polarity checks read those), first/second-person or phatic replies
("Glad it helped!"), unit words ("milligrams": the measures check compares
quantities), and requests without a question mark (a reply to "Thanks!" answers
nothing). Only the ``passage`` shape: a conversation's reply and a document's summary
bring in words of their own by design.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gateway.layers._grounding_sentence import SentenceCheck
from gateway.text.index import TextIndex
from gateway.text.phatic import is_phatic
from gateway.text.units import unit_named

__all__ = ["adds_nothing", "denies_the_asked", "negated"]

_PERSONAL = frozenset(["i", "i'm", "im", "me", "my", "mine", "we", "our", "us", "you", "your",
                       "yours"])
_PARTICLES = frozenset(["yes", "no", "yeah", "nope"])
_NEGATED = re.compile(r"\b(?:not|no|never|none|nor|neither|nothing|nobody|cannot|without)\b|n't\b",
                      re.IGNORECASE)
"""A negation word (a prefix such as "non-returnable" is the polarity check's)."""
PREFIX_MIN, PREFIX_MAX = 4, 6
"""Letters of an own word a context word must begin with to be that word in another form."""
MAX_NEW_WORDS = 12
"""An answer adding more words than this is more than a filled slot: the pooled word
evidence judges it."""


def adds_nothing(answer: str, checks: Sequence[SentenceCheck],
                 tokens: Sequence[Sequence[str]], words: set[str], ctx: TextIndex,
                 question: TextIndex) -> str | None:
    """Why ``answer`` (checked as ``checks``; each sentence's ``tokens`` and the content
    ``words``, as the sentence checks read them) adds nothing the context holds to the question it
    answers, or ``None`` (module docstring). The caller has seen a question mark in the
    question and no negation in the answer."""
    if not tokens or not tokens[0] or tokens[0][0] in _PARTICLES or _personal(tokens):
        return None
    asked = " ".join(s.text for s in question.sentences)
    if any(_context_value(c, asked) for c in checks):
        return None  # it states a value the context has (and the question does not)
    if not any(c.unsupported_words or c.unsupported_values for c in checks):
        # Every word is the question's or the context's: it answers unless it only
        # repeats the question (read last: the question's form first).
        if _repeats(asked, tokens, words) is None or \
                any(question.resolve(w) is None for w in words):
            return None
        return _repeats(asked, tokens, words)
    own: list[str] = []
    for w in words:  # stops at the first word of its own that the context has
        if question.resolve(w) is None:
            if ctx.resolve(w) is not None:
                return None
            own.append(w)
    if is_phatic(words):
        return None
    values = [v for c in checks for v in c.unsupported_values]
    if not (own or values):
        return _repeats(asked, tokens, words)
    if len(own) > MAX_NEW_WORDS or any(unit_named(w) for w in own):
        return None
    if _derived_forms(own, ctx):
        return None
    own.sort()
    return "adds to the question only what the context lacks: " + ", ".join([*values, *own][:8])


def _derived_forms(own: Sequence[str], ctx: TextIndex) -> bool:
    """Whether the context writes one of ``own`` in another form: a context word that
    begins like it ("pregnant" ~ *pregnancy*, "Asia" ~ *Asian*) — the word less its last
    two letters, at least ``PREFIX_MIN`` and at most ``PREFIX_MAX`` letters. A paraphrase
    changes a word's form; a made-up filler is another word. One pass over the context's
    vocabulary, only for an answer that would otherwise be flagged."""
    prefixes = {w[:max(PREFIX_MIN, min(len(w) - 2, PREFIX_MAX))] for w in own
                if len(w) >= PREFIX_MIN}
    if not prefixes:
        return False
    sizes = sorted({len(p) for p in prefixes})
    return any(v[:k] in prefixes for v in ctx.vocab for k in sizes)


def _context_value(check: SentenceCheck, asked: str) -> bool:
    """Whether the sentence states a value or date the context backs that the question
    does not already state ("U.S. Route 50" copied from the question brings nothing)."""
    if check.n_values <= len(check.unsupported_values):
        return False
    if check.facts is None:
        return True
    return any(f.kind in ("value", "date") and f.status in ("supported", "derived")
               and f.text not in asked for f in check.facts)


def _personal(tokens: Sequence[Sequence[str]]) -> bool:
    return any(not _PERSONAL.isdisjoint(t) for t in tokens)


def _repeats(asked: str, tokens: Sequence[Sequence[str]], words: set[str]) -> str | None:
    """Why an answer *sentence* made only of the question's words answers nothing, or
    ``None``: a wh-question that offers no alternatives ("Which …, A or B?" is answered
    by naming one) is answered by something it does not already say. A bare span
    ("BayArena" to "… hosted matches at which arena?") may be the question's own word:
    only a clause (a verb, five words or more) is read."""
    if not words or sum(map(len, tokens)) < 5 or not _WH.search(asked) or \
            _CHOICE.search(asked):
        return None
    if all(_VERB.isdisjoint(ts) for ts in tokens) and \
            not any(t.endswith("ed") for ts in tokens for t in ts):
        return None
    return "repeats the question's words and adds nothing"


_VERB = frozenset(["is", "was", "are", "were", "has", "have", "had", "be", "been", "does",
                   "did", "do"])
_CHOICE = re.compile(r"\bor\b|\bbetween\b|\bboth\b|\beither\b", re.IGNORECASE)
_WH = re.compile(r"\b(?:what|which|who|whom|whose|where|when|how\s+(?:many|much|long|old))\b",
                 re.IGNORECASE)
_NONE = re.compile(r"\b(?:never|none|nobody|nothing|no\s+one|neither)\b|\bno\s+[a-z]"
                   r"|\b(?:not|n't)\b.*\b(?:any|anyone|anything|anywhere|ever)\b"
                   r"|\b(?:is|was|are|were|does|did|do|has|have|had)\s+not\b"
                   r"|\b(?:is|was|are|were|does|did|do|has|have|had)n't\b",
                   re.IGNORECASE)
_CONTRAST = re.compile(r"(?:,|;|\bbut|\brather\s+than|\binstead\s+of)\s+(?:not|never)\b",
                       re.IGNORECASE)
_META = re.compile(r"\b(?:mention|mentions|mentioned|say|says|said|state|states|stated|"
                   r"specify|specifies|specified|information|document|documents|context|"
                   r"source|sources|passage|text|unknown|unclear|known)\b", re.IGNORECASE)


def denies_the_asked(answer: str, tokens: Sequence[Sequence[str]],
                     question: TextIndex) -> str | None:
    """Why ``answer`` (each sentence's ``tokens``) denies that what a wh-question asks for exists
    ("Which album …?" — "It was never released on any album.") or answers it with what is
    *not* ("Where …?" — "It was not released in Moscow."), or ``None``.

    A question on a passage asks *which* of the things the passage names; the answer
    that there is none contradicts the question's presupposition with nothing from the
    context behind it. Not a denial: an answer that says the sources do not tell
    ("the document does not mention …"), a contrast ("X, not Y"), or a first/second-person
    reply. The caller has seen a negation in the answer."""
    asked = question.sentences[-1].text
    if "?" not in asked or not _WH.search(asked):
        return None
    if not _NONE.search(answer) or _CONTRAST.search(answer) or _META.search(answer):
        return None
    if _personal(tokens):
        return None
    return "denies what the question asks for"


def negated(answer: str) -> bool:
    """Whether ``answer`` has a negation word (then only :func:`denies_the_asked` reads it;
    else only :func:`adds_nothing`)."""
    return _NEGATED.search(answer) is not None
