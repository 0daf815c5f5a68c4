"""``claims`` layer: seed 001's factual claim detector (model-free).

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
recall corpus). Both are pure functions; other layers and the risk assessor call
them directly.

The :class:`ClaimsLayer` needs no context: its score is the share of claims that
are *not* assertive-verifiable (1.0 when there are none) — a measure of how much
unsourced factual assertion an answer carries, not of whether it is true.
``passed`` is ``score >= threshold``; the default threshold 0.0 makes the layer
informational until a policy sets one.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field

from gateway.quantities import extract_dates, extract_numbers
from gateway.textindex import AnswerSentence, analyze_answer, answer_sentences
from gateway.textutil import Span, entity_candidates, split_sentences
from gateway.verify.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput

__all__ = [
    "ClaimsConfig",
    "ClaimsLayer",
    "ExtractedEntity",
    "FactualClaim",
    "REGULATORY_PATTERNS",
    "detect_claims",
    "extract_entities",
]

ClaimType = Literal["named_entity", "temporal", "quantitative", "regulatory"]
EntityType = Literal["PERSON", "ORG", "LOCATION", "MISC", "DATE", "NUMBER", "REGULATION"]
Classification = Literal["verifiable", "hedged", "opinion"]

_I = re.IGNORECASE
REGULATORY_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "dfars": (re.compile(r"\bDFARS\s*(?:\d{3}\.\d+(?:-\d+)?)?", _I),
              re.compile(r"\bDefense Federal Acquisition Regulations?(?: Supplement)?", _I)),
    "far": (re.compile(r"\bFAR\s*(?:Part\s*)?\d{1,2}(?:\.\d+(?:-\d+)?)?\b"),
            re.compile(r"(?<!Defense )\bFederal Acquisition Regulations?\b", _I)),
    "nist": (re.compile(r"\bNIST\s*(?:SP\s*)?\d{3}-\d+[A-Za-z]?(?:\s*(?:r|Rev\.?\s*)\d)?", _I),
             re.compile(r"\bNIST\s*(?:Cybersecurity\s*)?Framework(?:\s*\d\.\d)?", _I),
             re.compile(r"\bNIST\s*(?:CSF|SP)\b(?:\s*\d\.\d)?")),
    "cmmc": (re.compile(r"\bCMMC\s*(?:Level\s*|L)?\d(?:\.\d)?", _I),
             re.compile(r"\bCybersecurity Maturity Model Certification\b", _I)),
    "iso": (re.compile(r"\bISO(?:/IEC)?\s*\d{4,5}(?:-\d+)?(?::\d{4})?"),),
    "itar": (re.compile(r"\bITAR\b"),
             re.compile(r"\bInternational Traffic in Arms Regulations?\b", _I)),
    "ear": (re.compile(r"\bEAR\s*(?:Part\s*)?\d{3}(?:\.\d+)?"),
            re.compile(r"\bExport Administration Regulations?\b", _I)),
    "cfr": (re.compile(r"\b\d{1,2}\s*C\.?F\.?R\.?\s*(?:Part\s*|§\s*)?\d+(?:\.\d+)?"),),
}
"""Seed 001 Appendix A, ported (acronyms case-sensitive so "far"/"ear" do not match)."""
_REGULATORY_HINT = re.compile(
    r"DFARS|FAR|NIST|CMMC|ISO|ITAR|EAR|C\.?F\.?R"
    r"|(?i:dfars|nist|cmmc|federal acquisition|cybersecurity maturity|international traffic"
    r"|export administration)"
)
"""Text every pattern above needs: when it is absent, none of them is run."""
_REGULATORY_CASED = re.compile(r"DFARS|FAR|NIST|CMMC|ISO|ITAR|EAR|C\.?F\.?R")
_REGULATORY_FOLDED = re.compile(r"dfars|nist|cmmc|federal acquisition|cybersecurity maturity"
                                r"|international traffic|export administration")
"""The two halves of the hint, the second for lower-cased ASCII text: patterns that
open with a literal let the engine jump between candidate first letters."""

_DURATION = re.compile(
    r"\b(?:\d+(?:\.\d+)?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"fifteen|twenty|thirty|forty|fifty|several|few|many)\s*[- ]?"
    r"(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|centuries|century)"
    r"(?:[- ]old)?\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)[- ]century\b"
    r"|\b(?:last|next|this|previous|following)\s+(?:year|month|week|decade|century|season)\b"
    r"|\b(?:yesterday|today|tomorrow)\b"
    r"|\b(?:since|until|by|before|after|in|during)\s+(?:the\s+)?(?:spring|summer|autumn|fall|"
    r"winter)\s+of\s+\d{4}\b",
    _I,
)

_DURATION_UNITS = re.compile(
    r"second|minute|hour|day|week|month|year|decade|centur|season|tomorrow|spring|summer"
    r"|autumn|fall|winter"
)
"""Every duration match contains one of these (lower-cased ASCII text only)."""

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
_PLACES = frozenset(
    "afghanistan albania algeria argentina australia austria bangladesh belgium bolivia brazil "
    "bulgaria cambodia canada chile china colombia croatia cuba denmark egypt england estonia "
    "ethiopia finland france germany ghana greece haiti hungary iceland india indonesia iran iraq "
    "ireland israel italy jamaica japan jordan kenya korea latvia lebanon libya lithuania "
    "malaysia mexico morocco nepal netherlands nigeria norway pakistan peru philippines poland "
    "portugal romania russia scotland serbia singapore somalia spain sudan sweden switzerland "
    "syria taiwan thailand turkey uganda ukraine venezuela vietnam wales yemen zimbabwe europe "
    "asia africa america antarctica britain uk usa us alabama alaska arizona arkansas california "
    "colorado connecticut delaware florida georgia hawaii idaho illinois indiana iowa kansas "
    "kentucky louisiana maine maryland massachusetts michigan minnesota mississippi missouri "
    "montana nebraska nevada ohio oklahoma oregon pennsylvania tennessee texas utah vermont "
    "virginia washington wisconsin wyoming london paris berlin madrid rome moscow tokyo beijing "
    "shanghai delhi mumbai sydney melbourne toronto vancouver chicago boston seattle houston "
    "dallas miami atlanta denver detroit phoenix philadelphia brooklyn manhattan hollywood "
    "dubai cairo istanbul athens vienna dublin edinburgh glasgow manchester liverpool "
    "birmingham amsterdam brussels geneva zurich stockholm oslo copenhagen helsinki warsaw "
    "prague budapest lisbon barcelona milan naples munich hamburg frankfurt seoul bangkok "
    "jakarta manila hanoi nairobi lagos johannesburg sao lima bogota caracas havana".split()
)
_PERSON_TITLES = frozenset(
    "mr mr. mrs mrs. ms ms. dr dr. prof prof. sir dame lord lady king queen prince princess "
    "president senator governor mayor judge justice general gen. captain capt. colonel "
    "pope saint st. rev. reverend bishop sheikh".split()
)
_LOC_PREP = re.compile(r"\b(?:in|at|from|near|to|across|outside|inside)\s+$", _I)
_ACRONYM = re.compile(r"^[A-Z][A-Z&.]{1,7}$")
_TITLE_WORD = re.compile(r"^(?:[A-Z][a-z'’-]+|[A-Z]\.(?:[A-Z]\.)?|[A-Z][a-z]*[A-Z][a-z]+)$")

_OPINION = re.compile(
    r"\b(?:in my (?:opinion|view|experience)|i (?:think|believe|feel|guess|suppose|prefer|love|"
    r"like|hate|enjoy)|personally|imo|to me|my favou?rite|i'd say|i would say)\b"
    r"|\b(?:should|ought to|too (?:strict|lenient|expensive|long|short|much|many)|overrated|"
    r"underrated|the best|the worst|beautiful|amazing|awesome|terrible|awful|wonderful|"
    r"boring|great)\b",
    _I,
)
_HEDGE = re.compile(
    r"\b(?:may|might|could|possibly|perhaps|probably|likely|unlikely|reportedly|allegedly|"
    r"approximately|roughly|(?:around|about|some)\s+(?=[$£€]?\d)|estimated|estimates?|"
    r"suggests?|appears?|seems?|"
    r"apparently|presumably|arguably|it is (?:believed|thought|said)|i'?m not sure|not sure|"
    r"up to|as many as|nearly|almost|more than|less than|at least)\b",
    _I,
)
# On ASCII text, ignoring case is exactly lower-casing the text (the patterns are lower
# case), and the engine runs these about 2.5x faster without IGNORECASE.
_DURATION_ASCII = re.compile(_DURATION.pattern)
_OPINION_ASCII = re.compile(_OPINION.pattern)
_HEDGE_ASCII = re.compile(_HEDGE.pattern)
_TYPE_OF: dict[str, ClaimType] = {
    "PERSON": "named_entity", "ORG": "named_entity", "LOCATION": "named_entity",
    "MISC": "named_entity", "DATE": "temporal", "NUMBER": "quantitative",
    "REGULATION": "regulatory",
}
_PRIORITY: tuple[ClaimType, ...] = ("regulatory", "quantitative", "temporal", "named_entity")


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


def _entity_type(text: str, sentence: str, start: int) -> EntityType:
    words = text.split()
    low = [w.lower() for w in words]
    if any(w in _ORG_WORDS for w in low[1:]) or (low and low[0] in ("university", "bank")):
        return "ORG"
    if _ACRONYM.match(text) and text.lower().replace(".", "") not in _PLACES:
        return "ORG"
    if any(w in _LOC_WORDS for w in low[1:]) or all(w.strip(".,") in _PLACES for w in low):
        return "LOCATION"
    if len(words) == 1 and _LOC_PREP.search(sentence[:start]):
        return "LOCATION"
    before = sentence[:start].rstrip().rsplit(None, 1)
    if (before and before[-1].lower() in _PERSON_TITLES) or (low and low[0] in _PERSON_TITLES):
        return "PERSON"
    if 2 <= len(words) <= 4 and all(_TITLE_WORD.match(w) for w in words):
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
    out: list[ExtractedEntity] = []
    taken = bytearray(len(text))  # 1 = character already claimed by an earlier kind

    def add(s: int, e: int, kind: EntityType) -> None:
        piece = text[s:e].rstrip(" .,;:")
        e = s + len(piece)
        if piece and 1 not in taken[s:e]:
            out.append(ExtractedEntity(piece, kind, s, e))
            taken[s:e] = b"\x01" * (e - s)

    ascii_low = text.lower() if text.isascii() else None  # same offsets as ``text``
    if _may_cite_regulation(text, ascii_low):
        for patterns in REGULATORY_PATTERNS.values():
            for pat in patterns:
                for m in pat.finditer(text):
                    add(m.start(), m.end(), "REGULATION")
    dates = extract_dates(text)
    for d in dates:
        add(d.start, d.end, "DATE")
    if ascii_low is None:
        durations = _DURATION.finditer(text)
    elif _DURATION_UNITS.search(ascii_low):
        durations = _DURATION_ASCII.finditer(ascii_low)
    else:
        durations = iter(())
    for m in durations:
        add(m.start(), m.end(), "DATE")
    spans: Sequence[Span]
    for item in split_sentences(text) if sentences is None else sentences:
        if isinstance(item, AnswerSentence):
            sent, spans = item.span, item.entities
        else:
            sent, spans = item, entity_candidates(item.text)
        for span in spans:
            s = sent.start + span.start
            add(s, s + len(span.text), _entity_type(span.text, sent.text, span.start))
    for q in extract_numbers(text, dates):
        add(q.start, q.end, "NUMBER")
    return sorted(out, key=lambda e: e.start)


def _may_cite_regulation(text: str, ascii_low: str | None) -> bool:
    """``_REGULATORY_HINT.search(text)``; ``ascii_low`` is ``text.lower()`` if ASCII."""
    if ascii_low is None:
        return _REGULATORY_HINT.search(text) is not None
    return bool(_REGULATORY_CASED.search(text) or _REGULATORY_FOLDED.search(ascii_low))


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
    text: str, analyzed: Sequence[AnswerSentence] | None = None
) -> list[FactualClaim]:
    """One :class:`FactualClaim` per sentence with a factual element or an opinion.

    ``analyzed`` is ``analyze_answer(text)`` when the caller already has it.
    """
    if analyzed is None:
        analyzed = analyze_answer(text)
    sentences = [a.span for a in analyzed]
    entities = extract_entities(text, analyzed)
    starts = [e.start for e in entities]
    claims: list[FactualClaim] = []
    for n, sent in enumerate(sentences):
        mine = tuple(entities[bisect_left(starts, sent.start):bisect_left(starts, sent.end)])
        types = tuple(t for t in _PRIORITY if any(_TYPE_OF[e.type] == t for e in mine))
        label = classify(sent.text)
        if not types and label != "opinion":
            continue
        claims.append(FactualClaim(f"c{n}", sent.text, types, mine, label, sent.start, sent.end))
    return claims


class ClaimsConfig(LayerConfig):
    """Typed config of the ``claims`` layer (unknown keys are errors)."""

    threshold: float = Field(0.0, ge=0.0, le=1.0)
    """``passed`` iff score >= threshold; 0.0 = informational."""
    min_claims: int = Field(1, ge=0)
    """Fewer factual claims than this: score 1.0 (nothing worth judging)."""
    max_evidence: int = Field(20, ge=0)


class ClaimsLayer:
    """Detects and classifies factual claims (see module doc); no context needed."""

    name: ClassVar[str] = "claims"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = ClaimsConfig

    def __init__(self, config: ClaimsConfig, resources: LayerResources) -> None:
        self.config = config
        self.resources = resources

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        claims = detect_claims(inp.response_text,
                               answer_sentences(inp.context, inp.response_text))
        factual = [c for c in claims if c.types]
        assertive = [c for c in factual if c.classification == "verifiable"]
        by_class = {k: sum(1 for c in claims if c.classification == k)
                    for k in ("verifiable", "hedged", "opinion")}
        by_type = {t: sum(1 for c in factual if t in c.types) for t in _PRIORITY}
        if len(factual) < max(1, cfg.min_claims):
            score = 1.0
        else:
            score = 1.0 - len(assertive) / len(factual)
        passed = score >= cfg.threshold
        evidence = [
            Evidence(text=c.text, status=c.classification, score=None,
                     reason=f"{', '.join(c.types) or 'opinion'}: "
                            + "; ".join(f"{e.type} {e.text}" for e in c.entities))
            for c in claims[: cfg.max_evidence]
        ]
        return LayerResult(
            score=score, passed=passed,
            label="no_claims" if not claims else "assertive" if assertive else "qualified",
            explanation=(
                f"{len(claims)} claim(s): {by_class['verifiable']} verifiable, "
                f"{by_class['hedged']} hedged, {by_class['opinion']} opinion; types "
                + ", ".join(f"{k}={v}" for k, v in by_type.items())
            ),
            evidence=evidence,
            failed_claims=[c.text for c in assertive] if not passed else [],
            details={"claims": len(claims), "by_classification": by_class, "by_type": by_type,
                     "needs_verification": [c.text for c in claims if c.requires_verification]},
        )
