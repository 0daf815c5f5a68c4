"""The claim detector's brief form: what the ``claims`` layer's brief result reads.

:func:`brief_claims` gives each claim's text, types and classification, exactly as
:func:`~gateway.text.claims.detect_claims` (``typed=False``) would, without building an
:class:`~gateway.text.claims.ExtractedEntity` per entity or a
:class:`~gateway.text.claims.FactualClaim` per claim (frozen slotted dataclasses: each
costs more to build than the rest of its entity's work). tests/text/test_claims_fast.py
holds the two alike.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from gateway.text._claim_scan import (
    _HEDGE_ASCII,
    _HEDGE_PHRASES,
    _OPINION_ASCII,
    _OPINION_PHRASES,
    _Folded,
)
from gateway.text.answer import AnalyzedAnswer, AnswerSentence
from gateway.text.claims import _PRIORITY, _TYPE_OF, ClaimType, Classification, detect_claims
from gateway.text.tokens import Span

__all__ = ["BriefClaim", "brief_claims"]

_BIT: dict[str, int] = {k: 1 << _PRIORITY.index(t) for k, t in _TYPE_OF.items()}
_MASK_TYPES: tuple[tuple[ClaimType, ...], ...] = tuple(
    tuple(t for n, t in enumerate(_PRIORITY) if mask >> n & 1)
    for mask in range(1 << len(_PRIORITY)))
"""A bit per claim type (its place in :data:`_PRIORITY`); each mask -> its types in order."""

BriefClaim = tuple[str, tuple[ClaimType, ...], Classification]
"""A claim's ``(text, types, classification)``."""


def brief_claims(text: str, analyzed: Sequence[AnswerSentence]) -> list[BriefClaim]:
    """``[(c.text, c.types, c.classification) for c in detect_claims(text, analyzed,
    typed=False)]`` (see the module docstring).

    The entities are found and kept as in ``claims._extract`` (the same kinds in the same
    order, the same overlap rule), but each kept one only sets its claim type's bit
    in the mask of the sentence its start is in. That sentence is the one
    :func:`detect_claims` files it under when the sentences are exact slices of
    ``text``, in order and not overlapping (each start then lies in at most one):
    the answer's own analysis (``analyze_answer(text)``, which also gives the dates and
    numbers). Anything else takes :func:`detect_claims`."""
    folded = _Folded.of(text)
    spans = [a.span for a in analyzed]
    end = 0
    for sp in spans:
        if (sp.start < end or sp.end - sp.start != len(sp.text)
                or not text.startswith(sp.text, sp.start)):
            folded = None
            break
        end = sp.end
    if folded is None or not isinstance(analyzed, AnalyzedAnswer) or analyzed.text != text:
        return [(c.text, c.types, c.classification)
                for c in detect_claims(text, analyzed, typed=False)]
    starts = [sp.start for sp in spans]
    masks = [0] * len(spans)
    taken = bytearray(len(text))  # 1 = character already claimed by an earlier kind

    def add(s: int, e: int, bit: int) -> None:  # _extract's add(), no entity built
        piece = text[s:e].rstrip(" .,;:")
        e = s + len(piece)
        if piece and taken.find(1, s, e) < 0:
            taken[s:e] = b"\x01" * (e - s)
            n = bisect_right(starts, s) - 1
            if n >= 0 and s < spans[n].end:
                masks[n] |= bit

    regulatory, temporal = _BIT["REGULATION"], _BIT["DATE"]
    for s, e in folded.regulations(text):
        add(s, e, regulatory)
    for d in analyzed.dates:
        add(d.start, d.end, temporal)
    for s, e in folded.durations():
        add(s, e, temporal)
    named = _BIT["MISC"]
    # ``taken`` is all 0 from ``free`` on (after the last regulation, date or duration,
    # or the last name kept): a name starting there overlaps nothing and is not tested.
    free = taken.rfind(1) + 1
    for n, item in enumerate(analyzed):
        base = item.span.start
        for span in item.entities:
            s = base + span.start
            piece = text[s:s + len(span.text)].rstrip(" .,;:")
            e = s + len(piece)
            if piece and (s >= free or taken.find(1, s, e) < 0):
                taken[s:e] = b"\x01" * (e - s)
                masks[n] |= named  # s is in this sentence
                if e > free:
                    free = e
    quantitative = _BIT["NUMBER"]
    for q in analyzed.numbers:
        add(q.start, q.end, quantitative)
    labels = _labels(folded, spans)  # (the spans are ascending and disjoint: checked above)
    claims: list[BriefClaim] = []
    for n, mask in enumerate(masks):
        if mask:
            claims.append((spans[n].text, _MASK_TYPES[mask], labels[n]))
        elif labels[n] == "opinion":
            claims.append((spans[n].text, (), "opinion"))
    return claims


def _labels(folded: _Folded, sentences: Sequence[Span]) -> list[Classification]:
    """``[folded.classifier(sentences)(i) for i in range(len(sentences))]`` when the
    sentences are ascending and disjoint (each ``start`` >= the previous ``end``):
    each phrase start is then in at most one sentence, found by bisection, instead
    of bisecting both lists per sentence."""
    low, n = folded.low, len(folded.low)
    out: list[Classification] = ["verifiable"] * len(sentences)
    starts: list[int] = []
    ends: list[int] = []
    for i, sp in enumerate(sentences):
        s, e = sp.start, sp.end
        starts.append(s)
        if (s and (low[s - 1].isalnum() or low[s - 1] == "_")) or (
                e < n and (low[e].isalnum() or low[e] == "_")):  # inside a word
            piece = low[s:e]
            out[i] = ("opinion" if _OPINION_ASCII.search(piece) else
                      "hedged" if _HEDGE_ASCII.search(piece) else "verifiable")
            e = -1  # no phrase start is looked at in it
        ends.append(e)
    for p in folded.phrase_starts(_OPINION_PHRASES):
        i = bisect_right(starts, p) - 1
        if (i >= 0 and p < ends[i] and out[i] != "opinion"
                and _OPINION_ASCII.match(low, p, ends[i])):
            out[i] = "opinion"
    for p in folded.phrase_starts(_HEDGE_PHRASES):
        i = bisect_right(starts, p) - 1
        if (i >= 0 and p < ends[i] and out[i] == "verifiable"
                and _HEDGE_ASCII.match(low, p, ends[i])):
            out[i] = "hedged"
    return out
