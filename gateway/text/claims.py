"""Seed 001's factual claim detector (model-free, pure).

:func:`detect_claims` splits a text into sentences and returns one
:class:`FactualClaim` per sentence that asserts something checkable — it names an
entity (PERSON / ORG / LOCATION / other), a date or duration, a quantity, or a
regulation (DFARS, FAR, NIST, CMMC, ISO, ITAR, EAR, CFR) — or that states an
opinion. Each claim is classified:

- ``opinion`` — first-person stance or evaluative language ("in my opinion",
  "I think", "too strict", "the best"): flag, do not verify;
- ``hedged`` — the claim is qualified ("may", "reportedly", "approximately");
- ``verifiable`` — an assertive factual claim that needs a source.

:func:`extract_entities` is the entity extractor alone (used for the CA-13…CA-16
recall corpus). Both are pure functions, shared by the ``claims`` and
``fact-check`` layers (``gateway.layers``) and the risk assessor
(``gateway.verify.risk``).

Speed: the patterns are run only where they can match (see
:mod:`gateway.text._claim_scan`). Names are typed once per distinct name and only
when kept. The results are exactly those of the plain patterns
(tests/text/test_claims_fast.py).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.text._claim_scan import (
    _DURATION,
    _HEDGE,
    _HEDGE_ASCII,
    _I,
    _OPINION,
    _OPINION_ASCII,
    _REGULATORY_FLAT,
    REGULATORY_PATTERNS,
    _Folded,
    _may_cite_regulation,
)

# Re-exported: tests read these on this module, where they were defined before the split.
from gateway.text._claim_scan import _DURATION_ASCII as _DURATION_ASCII
from gateway.text._claim_scan import _DURATION_UNITS as _DURATION_UNITS
from gateway.text._claim_scan import _GLUED_UNITS as _GLUED_UNITS
from gateway.text._claim_scan import _REGULATORY_HINT as _REGULATORY_HINT
from gateway.text._claim_scan import _REGULATORY_LEADS as _REGULATORY_LEADS
from gateway.text._claim_scan import _SPANNING as _SPANNING
from gateway.text._claim_scan import _SPANNING_ENDS as _SPANNING_ENDS
from gateway.text._claim_scan import _SPANNING_WORDS as _SPANNING_WORDS
from gateway.text._claim_scan import _WORD_UNITS as _WORD_UNITS
from gateway.text.answer import AnalyzedAnswer, AnswerSentence, analyze_answer
from gateway.text.quantities import extract_quantities
from gateway.text.tokens import PLACES as _PLACES
from gateway.text.tokens import Span, entity_candidates, split_sentences

__all__ = [
    "CLAIM_TYPES",
    "ClaimType",
    "Classification",
    "ExtractedEntity",
    "FactualClaim",
    "REGULATORY_PATTERNS",
    "classify",
    "detect_claims",
    "extract_entities",
]

ClaimType = Literal["named_entity", "temporal", "quantitative", "regulatory"]
EntityType = Literal["PERSON", "ORG", "LOCATION", "MISC", "DATE", "NUMBER", "REGULATION"]
Classification = Literal["verifiable", "hedged", "opinion"]

_ORG_WORDS = frozenset(
    "inc inc. corp corp. corporation company co co. ltd ltd. llc plc university college institute "
    "association agency department ministry council committee commission bank party court club "
    "fc group foundation army navy administration bureau office service times news airlines "
    "airways technologies systems laboratories labs laboratory museum hospital school church "
    "union league federation organization organisation board senate congress parliament "
    "police press motors records studios entertainment pictures society trust fund academy "
    "nations network channel".split()
)
_LOC_WORDS = frozenset(
    "city county river lake mountain mountains mount island islands street avenue road bay "
    "valley ocean sea province state coast desert peninsula gulf strait canyon falls harbor "
    "harbour port beach kingdom republic district region square bridge airport".split()
)
_PERSON_TITLES = frozenset(
    "mr mr. mrs mrs. ms ms. dr dr. prof prof. sir dame lord lady king queen prince princess "
    "president senator governor mayor judge justice general gen. captain capt. colonel "
    "pope saint st. rev. reverend bishop sheikh".split()
)
_LOC_PREP = re.compile(r"\b(?:in|at|from|near|to|across|outside|inside)\s+$", _I)
_LOC_PREPS = ("in", "at", "from", "near", "to", "across", "outside", "inside")
_ACRONYM = re.compile(r"^[A-Z][A-Z&.]{1,7}$")
_TITLE_WORD = re.compile(r"^(?:[A-Z][a-z'’-]+|[A-Z]\.(?:[A-Z]\.)?|[A-Z][a-z]*[A-Z][a-z]+)$")
_TITLE_WORDS = re.compile(r"\s*(?:{w})(?:\s+(?:{w}))*\s*".format(w=_TITLE_WORD.pattern[1:-1]))
"""Every word of the text (``str.split``) is a ``_TITLE_WORD``."""

_TYPE_OF: dict[str, ClaimType] = {
    "PERSON": "named_entity", "ORG": "named_entity", "LOCATION": "named_entity",
    "MISC": "named_entity", "DATE": "temporal", "NUMBER": "quantitative",
    "REGULATION": "regulatory",
}
_PRIORITY: tuple[ClaimType, ...] = ("regulatory", "quantitative", "temporal", "named_entity")
_ORDERED_TYPES: dict[frozenset[ClaimType], tuple[ClaimType, ...]] = {
    frozenset(t for n, t in enumerate(_PRIORITY) if mask >> n & 1):
        tuple(t for n, t in enumerate(_PRIORITY) if mask >> n & 1)
    for mask in range(1 << len(_PRIORITY))
}
"""Every set of claim types -> its members in :data:`_PRIORITY` order."""
CLAIM_TYPES = _PRIORITY
"""The claim types, primary first (``FactualClaim.type`` picks the first one present)."""
_TITLE_WINDOW = max(map(len, _PERSON_TITLES)) + 1
"""The word before a name is looked for in this many characters (a longer one is no title)."""


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    """An entity with offsets into the text given to :func:`extract_entities`."""

    text: str
    type: EntityType
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class FactualClaim:
    """One sentence that asserts something checkable (or states an opinion)."""

    id: str
    text: str
    types: tuple[ClaimType, ...]
    """Every kind of factual element in the sentence (empty for a pure opinion)."""
    entities: tuple[ExtractedEntity, ...]
    classification: Classification
    start: int
    end: int

    @property
    def type(self) -> ClaimType | Literal["opinion"]:
        """The primary kind: regulatory > quantitative > temporal > named_entity."""
        for t in _PRIORITY:
            if t in self.types:
                return t
        return "opinion"

    @property
    def requires_verification(self) -> bool:
        return self.classification == "verifiable" and bool(self.types)


def _name_kind(text: str) -> tuple[EntityType | None, bool, EntityType]:
    """What :func:`_entity_type` can tell from the name alone: the type when the name
    settles it, whether it is a single word, and the type when neither look at the
    words before it (a locative preposition, a title) applies."""
    low = text.lower().split()  # == [w.lower() for w in text.split()]: lower() keeps \s
    if not low:
        return "LOCATION", False, "LOCATION"  # all() of nothing
    first, rest = low[0], low[1:]
    if (rest and not _ORG_WORDS.isdisjoint(rest)) or first in ("university", "bank"):
        return "ORG", False, "ORG"
    if _ACRONYM.match(text) and text.lower().replace(".", "") not in _PLACES:
        return "ORG", False, "ORG"
    if (rest and not _LOC_WORDS.isdisjoint(rest)) or (
            first.strip(".,") in _PLACES and all(w.strip(".,") in _PLACES for w in rest)):
        return "LOCATION", False, "LOCATION"
    person = first in _PERSON_TITLES or (
        2 <= len(low) <= 4 and _TITLE_WORDS.fullmatch(text) is not None)
    return None, not rest, "PERSON" if person else "MISC"


def _entity_type(text: str, sentence: str, start: int,
                 kind: tuple[EntityType | None, bool, EntityType] | None = None) -> EntityType:
    """The type of the candidate ``text`` found at ``start`` in ``sentence``
    (``kind`` is ``_name_kind(text)`` when the caller has it)."""
    fixed, single, fallback = _name_kind(text) if kind is None else kind
    if fixed is not None:
        return fixed
    if fallback == "PERSON" and not single:
        return "PERSON"
    # Only the words just before the name matter: ``k`` is where sentence[:start] ends
    # once trailing whitespace is stripped (str.isspace is the regex engine's \s).
    start = k = min(start, len(sentence))
    while k and sentence[k - 1].isspace():
        k -= 1
    # _LOC_PREP ends in \s+$: a match is a preposition (at most 7 letters) ending at k,
    # so searching from k - 7 finds it (\b still sees the character before ``pos``);
    # ASCII text not ending in one cannot match.
    if single and k < start:
        before = sentence[max(0, k - 7):k]
        if ((not before.isascii() or before.lower().endswith(_LOC_PREPS))
                and _LOC_PREP.search(sentence, max(0, k - 7), start)):
            return "LOCATION"
    if fallback == "PERSON":
        return "PERSON"
    if k and sentence[max(0, k - _TITLE_WINDOW):k].rsplit(None, 1)[-1].lower() in _PERSON_TITLES:
        return "PERSON"
    return "MISC"


def extract_entities(
    text: str, sentences: Sequence[Span] | Sequence[AnswerSentence] | None = None
) -> list[ExtractedEntity]:
    """Regulations, dates/durations, quantities and named entities, in text order.

    ``sentences`` is ``split_sentences(text)`` or ``analyze_answer(text)`` when the
    caller already has it (the latter carries the entity candidates too).

    Earlier kinds win overlaps (regulations, dates, durations, names, then
    quantities): a regulation's number is not also a quantity, a date's year is not
    a quantity, ``"X-Men 2"`` stays one name.
    """
    return _extract(text, split_sentences(text) if sentences is None else sentences,
                    _Folded.of(text))


def _extract(text: str, sentences: Sequence[Span] | Sequence[AnswerSentence],
             folded: _Folded | None, typed: bool = True) -> list[ExtractedEntity]:
    """:func:`extract_entities`; ``folded`` is ``_Folded.of(text)``. ``typed=False``:
    every name is ``MISC`` (not told apart as a person, place or organisation: each is
    a ``named_entity`` claim alike), the rest as with ``typed``."""
    out: list[ExtractedEntity] = []
    taken = bytearray(len(text))  # 1 = character already claimed by an earlier kind

    def add(s: int, e: int, kind: EntityType) -> None:
        piece = text[s:e].rstrip(" .,;:")
        e = s + len(piece)
        if piece and taken.find(1, s, e) < 0:
            out.append(ExtractedEntity(piece, kind, s, e))
            taken[s:e] = b"\x01" * (e - s)

    items: list[tuple[Span, Sequence[Span] | None]] = [
        (item.span, item.entities) if isinstance(item, AnswerSentence) else (item, None)
        for item in sentences]
    if folded is None:
        if _may_cite_regulation(text, None):
            for pat in _REGULATORY_FLAT:
                for m in pat.finditer(text):
                    add(m.start(), m.end(), "REGULATION")
    else:
        for s, e in folded.regulations(text):
            add(s, e, "REGULATION")
    # analyze_answer(text) found the whole text's dates and numbers already.
    found = sentences if isinstance(sentences, AnalyzedAnswer) and sentences.text == text \
        else None
    dates, numbers = (found.dates, found.numbers) if found is not None \
        else extract_quantities(text)
    for d in dates:
        add(d.start, d.end, "DATE")
    durations: Iterable[tuple[int, int]]
    if folded is None:
        durations = (m.span() for m in _DURATION.finditer(text))
    else:
        durations = folded.durations()
    for s, e in durations:
        add(s, e, "DATE")
    kinds: dict[str, tuple[EntityType | None, bool, EntityType]] = {}
    for sent, candidates in items:
        base = sent.start
        for span in entity_candidates(sent.text) if candidates is None else candidates:
            name = span.text
            s = base + span.start
            piece = text[s:s + len(name)].rstrip(" .,;:")  # add(), typed only if kept
            e = s + len(piece)
            if piece and taken.find(1, s, e) < 0:
                if not typed:
                    out.append(ExtractedEntity(piece, "MISC", s, e))
                    taken[s:e] = b"\x01" * (e - s)
                    continue
                kind = kinds.get(name)
                if kind is None:
                    kind = kinds[name] = _name_kind(name)
                fixed, single, fallback = kind
                if fixed is None and (single or fallback == "MISC"):  # the context decides
                    fixed = _entity_type(name, sent.text, span.start, kind)
                out.append(ExtractedEntity(piece, fixed or fallback, s, e))
                taken[s:e] = b"\x01" * (e - s)
    for q in numbers:
        add(q.start, q.end, "NUMBER")
    return sorted(out, key=lambda e: e.start)


def classify(sentence: str) -> Classification:
    """``opinion`` beats ``hedged`` beats ``verifiable`` (see the module docstring)."""
    if sentence.isascii():
        text, opinion, hedge = sentence.lower(), _OPINION_ASCII, _HEDGE_ASCII
    else:
        text, opinion, hedge = sentence, _OPINION, _HEDGE
    if opinion.search(text):
        return "opinion"
    if hedge.search(text):
        return "hedged"
    return "verifiable"


def detect_claims(
    text: str, analyzed: Sequence[AnswerSentence] | None = None, *, typed: bool = True
) -> list[FactualClaim]:
    """One :class:`FactualClaim` per sentence with a factual element or an opinion.

    ``analyzed`` is ``analyze_answer(text)`` when the caller already has it.
    ``typed=False``: the claims, their types and classifications are the same, but
    each named entity's ``type`` is ``MISC`` (for a caller that reads no entity type:
    telling a person from a place is most of the names' cost).
    """
    if analyzed is None:
        analyzed = analyze_answer(text)
    sentences = [a.span for a in analyzed]
    folded = _Folded.of(text)
    entities = _extract(text, analyzed, folded, typed)
    if folded is not None and all(sent.end - sent.start == len(sent.text)
                                  and text.startswith(sent.text, sent.start)
                                  for sent in sentences):
        label = folded.classifier(sentences)
    else:
        def label(i: int) -> Classification:
            return classify(sentences[i].text)
    starts = [e.start for e in entities]
    kinds = [_TYPE_OF[e.type] for e in entities]
    claims: list[FactualClaim] = []
    for n, sent in enumerate(sentences):
        i, j = bisect_left(starts, sent.start), bisect_left(starts, sent.end)
        mine = tuple(entities[i:j])
        types = _ORDERED_TYPES[frozenset(kinds[i:j])]
        if types:
            claims.append(FactualClaim(f"c{n}", sent.text, types, mine, label(n),
                                       sent.start, sent.end))
        elif label(n) == "opinion":
            claims.append(FactualClaim(f"c{n}", sent.text, types, mine, "opinion",
                                       sent.start, sent.end))
    return claims
