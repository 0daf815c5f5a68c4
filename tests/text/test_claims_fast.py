"""The claim detector's fast paths give exactly what the plain patterns give.

``gateway.text.claims`` runs its case-insensitive patterns on the lower-cased text
and only where a literal every match contains occurs (see its ``_Folded``). These
tests hold it to straightforward reference versions (the layer as first written:
every pattern over the whole text, ``classify`` per sentence, ``_entity_type`` on
``sentence[:start]``) on random texts built from the patterns' own words, and check
the Unicode facts the lower-casing relies on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re

import pytest

from gateway.text.answer import AnswerSentence, analyze_answer
from gateway.sources.context import GroundingContext
from gateway.layers.claims import ClaimsConfig, ClaimsLayer
from gateway.text import _claim_scan, claims, claims_brief
from gateway.text.claims import (
    REGULATORY_PATTERNS,
    ExtractedEntity,
    FactualClaim,
    classify,
    detect_claims,
    extract_entities,
)
from gateway.text.quantities import extract_dates, extract_numbers
from gateway.text.tokens import Span, entity_candidates, split_sentences
from gateway.layers.base import Evidence, LayerResources, LayerResult, VerifyInput

# --- reference versions -------------------------------------------------------------


def ref_entity_type(text: str, sentence: str, start: int) -> str:
    words = text.split()
    low = [w.lower() for w in words]
    if any(w in claims._ORG_WORDS for w in low[1:]) or (low and low[0] in ("university", "bank")):
        return "ORG"
    if claims._ACRONYM.match(text) and text.lower().replace(".", "") not in claims._PLACES:
        return "ORG"
    if any(w in claims._LOC_WORDS for w in low[1:]) or all(
            w.strip(".,") in claims._PLACES for w in low):
        return "LOCATION"
    if len(words) == 1 and claims._LOC_PREP.search(sentence[:start]):
        return "LOCATION"
    before = sentence[:start].rstrip().rsplit(None, 1)
    if (before and before[-1].lower() in claims._PERSON_TITLES) or (
            low and low[0] in claims._PERSON_TITLES):
        return "PERSON"
    if 2 <= len(words) <= 4 and all(claims._TITLE_WORD.match(w) for w in words):
        return "PERSON"
    return "MISC"


def ref_extract(text: str, sentences: list[Span] | None = None) -> list[ExtractedEntity]:
    out: list[ExtractedEntity] = []
    taken = bytearray(len(text))

    def add(s: int, e: int, kind: claims.EntityType) -> None:
        piece = text[s:e].rstrip(" .,;:")
        e = s + len(piece)
        if piece and 1 not in taken[s:e]:
            out.append(ExtractedEntity(piece, kind, s, e))
            taken[s:e] = b"\x01" * (e - s)

    for patterns in REGULATORY_PATTERNS.values():
        for pat in patterns:
            for m in pat.finditer(text):
                add(m.start(), m.end(), "REGULATION")
    dates = extract_dates(text)
    for d in dates:
        add(d.start, d.end, "DATE")
    for m in claims._DURATION.finditer(text):
        add(m.start(), m.end(), "DATE")
    for sent in split_sentences(text) if sentences is None else sentences:
        for span in entity_candidates(sent.text):
            s = sent.start + span.start
            add(s, s + len(span.text), ref_entity_type(span.text, sent.text, span.start))  # type: ignore[arg-type]
    for q in extract_numbers(text, dates):
        add(q.start, q.end, "NUMBER")
    return sorted(out, key=lambda e: e.start)


def ref_detect(text: str, sentences: list[Span]) -> list[FactualClaim]:
    entities = ref_extract(text, sentences)
    out = []
    for n, sent in enumerate(sentences):
        mine = tuple(e for e in entities if sent.start <= e.start < sent.end)
        types = tuple(t for t in claims._PRIORITY
                      if any(claims._TYPE_OF[e.type] == t for e in mine))
        label = classify(sent.text)
        if types or label == "opinion":
            out.append(FactualClaim(f"c{n}", sent.text, types, mine, label,
                                    sent.start, sent.end))
    return out


# --- random texts made of the patterns' words ---------------------------------------

WORDS = (
    # opinions and hedges (every alternative), with tricks
    "in my opinion view experience I think believe feel guess suppose prefer love like hate "
    "enjoy personally IMO to me my favorite favourite i'd say would should ought too strict "
    "lenient expensive long short much many overrated underrated the best worst beautiful "
    "amazing awesome terrible awful wonderful boring great Great may might could possibly "
    "perhaps probably likely unlikely reportedly allegedly approximately roughly around about "
    "some estimated estimate estimates suggest suggests appear appears seem seems apparently "
    "presumably arguably it is believed thought said i'm im not sure up as nearly almost "
    "more less than at least maybe Mayor support someone aboutface $30 €5 £9 30 "
    # durations
    "5 2.5 1999 2020 21st 3rd a an one two twelve fifteen several few second seconds minute "
    "hours day days week month monthly months year years year-old old decades century "
    "centuries last next this previous following season seasons yesterday today tomorrow "
    "since until by before after during spring summer autumn fall winter of 5years fiveyears "
    "ayear Monday holiday weekend "
    # regulations
    "DFARS 252.204-7012 DFARS252.204 Defense Federal Acquisition Regulation Regulations "
    "Supplement FAR Part 15 52.204-21 NIST SP 800-171 Rev. r2 Cybersecurity Framework 1.1 CSF "
    "CMMC Level L2 2.0 Maturity Model Certification ISO ISO/IEC 27001 27001:2013 ITAR "
    "International Traffic Arms EAR 734 Export Administration 48 CFR C.F.R. § far ear nist "
    # names and places
    "Dr. Mr. Prof. President King Jane Goodall Smith John Paris London Texas University Bank "
    "European Central Lake River City NASA U.S. U.K. X-Men F-35 in at from near across outside "
    # non-ASCII
    "é Zoë Zürich — ’ “ ” İstanbul ıt ſome Σ ΣΑΣ \u212a ٣ \u00a0"
).split()
PHRASES = [
    # every alternative of _OPINION and _HEDGE, spelled out
    "in my opinion", "in my view", "in my experience", "I think", "i believe", "i feel",
    "i guess", "i suppose", "i prefer", "i love", "i like", "i hate", "i enjoy", "personally",
    "IMO", "to me", "my favorite", "my favourite", "i'd say", "I would say", "should",
    "ought to", "too strict", "too lenient", "too expensive", "too long", "too short",
    "too much", "too many", "overrated", "underrated", "the best", "The worst", "beautiful",
    "amazing", "awesome", "terrible", "awful", "wonderful", "boring", "great", "may", "might",
    "could", "possibly", "perhaps", "probably", "likely", "unlikely", "reportedly",
    "allegedly", "approximately", "roughly", "around 30", "about $30", "some €5", "about\n5",
    "estimated", "estimates", "estimate", "suggests", "suggest", "appears", "appear", "seems",
    "seem", "apparently", "presumably", "arguably", "it is believed", "it is thought",
    "It is said", "i'm not sure", "im not sure", "not sure", "up to", "as many as", "nearly",
    "almost", "more than", "less than", "at least",
    # durations
    "5 years", "2.5 years", "5 -years", "a year-old", "21st-century", "3rd century",
    "last  year", "next\nmonth", "since the spring of 1999", "during winter of 2001",
    "3 Years old", "ten decades", "several centuries", "yesterday", "today", "tomorrow",
    "this season", "twenty-year", "5years",
]
SEPARATORS = [" ", " ", " ", " ", "  ", "\n", ". ", ", ", "-", "", "\t", "\u00a0", "! ", "? ",
              "; ", ".\n", " (", ") "]


def random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 30)):
            word = rng.choice(PHRASES if rng.random() < 0.2 else WORDS)
            r = rng.random()
            parts.append(word.upper() if r < 0.1 else word.capitalize() if r < 0.3 else word)
            parts.append(rng.choice(SEPARATORS))
        texts.append("".join(parts))
    return texts


def as_tuples(entities: list[ExtractedEntity] | tuple[ExtractedEntity, ...]) -> list[tuple]:  # type: ignore[type-arg]
    return [(e.text, e.type, e.start, e.end) for e in entities]


@pytest.mark.parametrize("seed", range(2))
def test_extract_entities_matches_the_plain_patterns(seed: int) -> None:
    for text in random_texts(seed, 1500):
        assert as_tuples(extract_entities(text)) == as_tuples(ref_extract(text)), text
        analyzed = analyze_answer(text)
        dates = extract_dates(text)
        if (analyzed.dates, analyzed.numbers) == (dates, extract_numbers(text, dates)):
            assert as_tuples(extract_entities(text, analyzed)) == as_tuples(
                ref_extract(text)), text
        # else: a value ran across a sentence edge over the whole text ("€5\nK");
        # analyze_answer reads values per sentence (test_values_never_span_sentences)


def test_values_never_span_sentences() -> None:
    """With the request's analysis, claims reads dates and numbers sentence by sentence,
    as grounding does: "in May. 5 people died" states a month and a number, not the
    date "May. 5"."""
    text = "The flood came in May. 5 people died. It cost \u20ac5\nK in all."
    whole = [(e.text, e.type) for e in extract_entities(text)]
    got = [(e.text, e.type) for e in extract_entities(text, analyze_answer(text))]
    assert ("May. 5", "DATE") in whole and ("\u20ac5\nK", "NUMBER") in whole
    assert ("5", "NUMBER") in got and ("\u20ac5", "NUMBER") in got
    assert all(e[0] != "May. 5" for e in got)


@pytest.mark.parametrize("seed", range(2))
def test_detect_claims_matches_per_sentence_classify(seed: int) -> None:
    for text in random_texts(100 + seed, 1500):
        analyzed = analyze_answer(text)
        got = detect_claims(text, analyzed)
        want = ref_detect(text, [a.span for a in analyzed])
        assert [(c.id, c.types, c.classification, as_tuples(c.entities)) for c in got] == [
            (c.id, c.types, c.classification, as_tuples(c.entities)) for c in want], text


def random_spans(rng: random.Random, text: str) -> list[Span]:
    """``text`` cut at up to six random places (inside words too), shuffled 30 % of the time."""
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 6))))
    bounds = [0, *cuts, len(text)]
    spans = [Span(text[a:b], a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    if rng.random() < 0.3:
        rng.shuffle(spans)
    return spans


def test_any_sentence_spans_give_the_same_result() -> None:
    """Callers may pass any spans: cut inside words, out of order."""
    rng = random.Random(7)
    for text in random_texts(200, 1500):
        spans = random_spans(rng, text)
        assert as_tuples(extract_entities(text, spans)) == as_tuples(ref_extract(text, spans))
        analyzed = [AnswerSentence(s, tuple(entity_candidates(s.text))) for s in spans]
        got = detect_claims(text, analyzed)
        want = ref_detect(text, spans)
        assert [(c.id, c.classification, as_tuples(c.entities)) for c in got] == [
            (c.id, c.classification, as_tuples(c.entities)) for c in want], (text, spans)


DURATION_WORDS = (
    "5 2.5 ٣ 1999 21st 3rd 12th a an one two twelve fifteen several few many second seconds "
    "minute hours day days week month monthly year years decades decade century centuries "
    "last next this previous following season yesterday today tomorrow since until by before "
    "after in during the spring summer autumn fall winter of old Old 5years fiveyears ayear "
    "holiday it was é _ x"
).split()


def test_durations_match_the_whole_text_scan() -> None:
    """Dense in durations: every piece boundary is exercised."""
    rng = random.Random(9)
    gaps = [" ", " ", " ", "  ", "-", "\n", ". ", ".", ", ", "", "\u00a0", "_", "é", " - "]
    for _ in range(6000):
        text = "".join(rng.choice(DURATION_WORDS) + rng.choice(gaps)
                       for _ in range(rng.randint(1, 14)))
        folded = claims._Folded.of(text)
        assert folded is not None
        want = [m.span() for m in claims._DURATION.finditer(text)]
        assert list(folded.durations()) == want, text


def test_entity_type_looks_back_like_slicing() -> None:
    rng = random.Random(3)
    words = ("in at from near to across outside inside INSIDE Mr. Dr. president reverend king "
             "the of Paris London Smith John IBM U.S. NASA Bank University Lake é ın acroſs İn "
             "xin").split()
    gaps = [" ", "  ", "\n", "\u00a0", "", ", ", " \n"]
    for _ in range(20000):
        sentence = "".join(rng.choice(words) + rng.choice(gaps) for _ in range(rng.randint(1, 8)))
        start = rng.randint(0, len(sentence) + 2)
        name = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        assert claims._entity_type(name, sentence, start) == ref_entity_type(
            name, sentence, start), (name, sentence, start)


def ref_verify(claims_: list[FactualClaim], cfg: ClaimsConfig) -> LayerResult:
    """``ClaimsLayer.verify`` as first written, from the claims."""
    factual = [c for c in claims_ if c.types]
    assertive = [c for c in factual if c.classification == "verifiable"]
    by_class = {k: sum(1 for c in claims_ if c.classification == k)
                for k in ("verifiable", "hedged", "opinion")}
    by_type = {t: sum(1 for c in factual if t in c.types) for t in claims._PRIORITY}
    few = len(factual) < max(1, cfg.min_claims)
    score = 1.0 if few else 1.0 - len(assertive) / len(factual)
    passed = score >= cfg.threshold
    evidence = [
        Evidence(text=c.text, status=c.classification, score=None,
                 reason=f"{', '.join(c.types) or 'opinion'}: "
                        + "; ".join(f"{e.type} {e.text}" for e in c.entities))
        for c in claims_[: cfg.max_evidence]
    ]
    return LayerResult(
        score=score, passed=passed,
        label="no_claims" if not claims_ else "assertive" if assertive else "qualified",
        explanation=(
            f"{len(claims_)} claim(s): {by_class['verifiable']} verifiable, "
            f"{by_class['hedged']} hedged, {by_class['opinion']} opinion; types "
            + ", ".join(f"{k}={v}" for k, v in by_type.items())
        ),
        evidence=evidence,
        failed_claims=[c.text for c in assertive] if not passed else [],
        details={"claims": len(claims_), "by_classification": by_class, "by_type": by_type,
                 "needs_verification": [c.text for c in claims_ if c.requires_verification]},
    )


def test_layer_result_is_unchanged() -> None:
    rng = random.Random(4)
    for text in random_texts(400, 300):
        cfg = ClaimsConfig(threshold=rng.choice([0.0, 0.3, 0.5, 1.0]),
                           min_claims=rng.randint(0, 3), max_evidence=rng.randint(0, 25))
        layer = ClaimsLayer(cfg, LayerResources())
        got = asyncio.run(layer.verify(VerifyInput(messages=[], response_text=text,
                                                   context=GroundingContext())))
        want = ref_verify(detect_claims(text), cfg)
        assert dataclasses.asdict(got) == dataclasses.asdict(want), text


# --- the facts the fast paths rest on -----------------------------------------------


def test_lower_casing_is_ignoring_case_except_for_dotless_i_and_long_s() -> None:
    """Over all of Unicode: "İ" is the only character lower() lengthens; apart from "ı"
    and "ſ", a character matches a pattern character ignoring case iff its lower
    case equals it, and lower-casing keeps it a word / digit / space character or not.
    """
    everything = "".join(chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000)
    assert len(everything.lower()) == len(everything) + 1  # "İ" -> "i̇"
    chars = everything.replace("\u0130", "")
    low = chars.lower()
    assert len(low) == len(chars)
    pattern_chars = set("".join(p.pattern for p in (
        claims._DURATION_ASCII, claims._OPINION_ASCII, claims._HEDGE_ASCII)))
    literals = {c for c in pattern_chars if c.isalnum() or c in " '-.$£€"}
    literals |= set("abcdefghijklmnopqrstuvwxyz0123456789 /:§")  # regulatory leads
    differ: set[str] = set()
    for c in sorted(literals):
        ignoring = {m.start() for m in re.finditer(re.escape(c), chars, re.IGNORECASE)}
        lowered = {m.start() for m in re.finditer(re.escape(c), low)}
        differ |= {chars[i] for i in ignoring ^ lowered}
    for cls in (r"\w", r"\d", r"\s"):
        before = {m.start() for m in re.finditer(cls, chars)}
        after = {m.start() for m in re.finditer(cls, low)}
        differ |= {chars[i] for i in before ^ after}
    assert differ == {"\u0131", "\u017f"}


def test_regulatory_leads_open_their_patterns() -> None:
    assert len(claims._REGULATORY_LEADS) == len(claims._REGULATORY_FLAT)
    for pat, (lead, ci, word) in zip(claims._REGULATORY_FLAT, claims._REGULATORY_LEADS,
                                     strict=True):
        body = re.sub(r"^\(\?<!\w+ \)", "", pat.pattern)
        if lead is None:
            assert "C\\.?F\\.?R" in body
            continue
        assert body.startswith("\\b"), pat.pattern
        opening = body[2:2 + len(lead)]
        assert (opening.lower() == lead) if ci else (opening == lead), pat.pattern
        assert bool(pat.flags & re.IGNORECASE) is ci
        assert body[2 + len(lead)] not in "?*+{", pat.pattern
        if word is not None:
            assert ci and lead.startswith(word.decode() + " ")


def test_spanning_shortcuts_agree_with_the_pattern() -> None:
    numbers = [b"", b"5", b"12", b"a", b"an", b"seven", b"many", b"x"]
    forms = [b"second", b"seconds", b"hours", b"day", b"decades", b"centuries", b"century",
             b"st", b"nd", b"th", b"5st", b"21st", b"last", b"the", b"of", b"fall", b"in", b"it",
             b"yesterday", b"season", b"old", b"s", b"y", b"7"]
    for word in claims._SPANNING_WORDS:
        assert claims._SPANNING.fullmatch(word), word
    for word in (n + f for n in numbers for f in forms):
        if claims._SPANNING.fullmatch(word) and word and not word[-1:].isdigit():
            assert word in claims._SPANNING_WORDS or word.endswith(claims._SPANNING_ENDS), word


def test_locative_prepositions_are_the_patterns() -> None:
    alternatives = re.search(r"\(\?:([a-z|]+)\)", claims._LOC_PREP.pattern)
    assert alternatives is not None
    assert tuple(alternatives.group(1).split("|")) == claims._LOC_PREPS


def test_unit_lists_cover_the_duration_units() -> None:
    units = {u.encode() for u in claims._DURATION_UNITS.pattern.split("|")}
    assert units == set(claims._GLUED_UNITS) | {u.strip() for u in claims._WORD_UNITS}


CI_REGULATIONS = (
    "dfars 252.204-7012", "Defense Federal Acquisition Regulation Supplement",
    "federal acquisition regulations", "nist sp 800-171", "Nist Cybersecurity Framework 1.1",
    "cmmc level 2", "Cybersecurity Maturity Model Certification",
    "international traffic in arms regulations", "Export Administration Regulations",
)


_CASED = re.compile(r"DFARS|FAR|NIST|CMMC|ISO|ITAR|EAR|C\.?F\.?R")
"""The case-sensitive half of the regulation hint as a pattern: ``_cased_hint``'s
reference."""

@pytest.mark.parametrize("phrase", CI_REGULATIONS)
def test_each_case_insensitive_regulation_passes_the_gate(phrase: str) -> None:
    """With no case-sensitive acronym in the text, each case-insensitive pattern is still
    tried (the gate's literal and whole-word tests, ``_CI_KEYS`` / ``_CI_WORDS``)."""
    for text in (phrase, phrase.lower(), f"Under the {phrase}, they filed.", f"x{phrase}y",
                 f"{phrase.split()[0]}s and more"):
        assert _CASED.search(text) is None
        assert as_tuples(extract_entities(text)) == as_tuples(ref_extract(text)), text
    assert any(e.type == "REGULATION" for e in extract_entities(phrase))


def test_cased_hint_is_the_cased_pattern() -> None:
    """``_cased_hint`` (substring tests) says what ``_CASED.search`` (the pattern it
    replaced) says, on the labelled texts and on random texts dense in the acronyms'
    pieces."""
    from corpus_texts import real_texts

    rng = random.Random(11)
    bits = ["FAR", "FA", "AR", "NIST", "NIS", "CMMC", "CMM", "ISO", "IS", "ITAR", "ITA", "EAR",
            "EA", "C", "F", "R", ".", "CF", "C.", ".F", "F.R", "DFARS", "x", " ", "c.f.r", "é"]
    texts = list(real_texts()) + ["".join(rng.choices(bits, k=rng.randint(0, 8)))
                                  for _ in range(20000)]
    hits = 0
    for text in texts:
        want = _CASED.search(text) is not None
        assert _claim_scan._cased_hint(text) is want, text
        hits += want
    assert 1000 < hits < len(texts) - 1000


def test_vocab_of_asked_words_gives_what_every_word_gives() -> None:
    """``_Folded.vocab`` keeps only the words of ``_ASKED``: every scan gives what it
    gives with the set of all the text's words."""
    rng = random.Random(11)
    regulations = ("Defense Federal Acquisition Regulations", "Federal Acquisition Regulation",
                   "Cybersecurity Maturity Model Certification", "export administration "
                   "regulations", "International Traffic in Arms Regulation", "DFARS 252.204",
                   "NIST SP 800-171", "cmmc level 2", "the Defense", "federal")
    texts = [*random_texts(300, 600), *(
        "".join(rng.choice(DURATION_WORDS) + rng.choice((" ", "-", ". "))
                for _ in range(rng.randint(1, 14))) for _ in range(600)), *(
        " ".join(rng.choice(regulations + ("it was", "in", "by")) for _ in range(4))
        for _ in range(300))]
    for text in texts:
        fast = claims._Folded.of(text)
        if fast is None:
            continue
        full = claims._Folded.of(text)
        assert full is not None
        full.vocab = set(full.words.split())
        assert fast.vocab == full.vocab & _claim_scan._ASKED
        for table in (_claim_scan._OPINION_PHRASES, _claim_scan._HEDGE_PHRASES):
            assert fast.phrase_starts(table) == full.phrase_starts(table), text
        assert list(fast.regulations(text)) == list(full.regulations(text)), text
        assert list(fast.durations()) == list(full.durations()), text
        spans = split_sentences(text)
        a, b = fast.classifier(spans), full.classifier(spans)
        assert [a(i) for i in range(len(spans))] == [b(i) for i in range(len(spans))], text


def _as_brief(found: list[FactualClaim]) -> list[tuple]:  # type: ignore[type-arg]
    return [(c.text, c.types, c.classification) for c in found]


def test_brief_claims_are_detect_claims_without_the_objects() -> None:
    """``brief_claims`` (kind bits per sentence, no entity or claim objects) gives each
    claim's text, types and classification as ``detect_claims(typed=False)`` does: on
    every labelled text and answer sentence, on random texts dense in the patterns'
    words, and on spans it must hand to ``detect_claims`` (cut, shuffled, overlapping)."""
    from corpus_texts import real_texts

    texts = [*real_texts(), *random_texts(500, 1500)]
    texts += [s.text for t in list(texts) for s in split_sentences(t)]
    fast = 0
    for text in texts:
        analyzed = analyze_answer(text)
        want = _as_brief(detect_claims(text, analyzed, typed=False))
        assert claims_brief.brief_claims(text, analyzed) == want, text
        fast += bool(want)
    assert fast > 1000
    rng = random.Random(8)
    for text in random_texts(501, 800):
        spans = random_spans(rng, text)
        if spans and rng.random() < 0.3:
            spans.append(spans[0])  # overlapping
        analyzed = [AnswerSentence(s, tuple(entity_candidates(s.text))) for s in spans]
        assert claims_brief.brief_claims(text, analyzed) == \
            _as_brief(detect_claims(text, analyzed, typed=False)), (text, spans)


def test_unit_words_from_the_vocabulary_give_the_whole_text_durations() -> None:
    """The duration scan takes its unit words from the fold's vocabulary when no letter
    follows a digit, and searches each glued unit otherwise: words holding several
    units, overlapping ones ("dayear", "centuryear"), numbers glued to units and
    whole-word units give the durations of the whole-text pattern, on the labelled
    texts and on dense random texts."""
    from corpus_texts import real_texts

    rng = random.Random(12)
    glued = ("dayear", "5dayyears", "weekday", "yesterday", "today", "centuryear", "5yearyear",
             "hourminutes", "2seconds", "yearsday", "monthsecond", "adecades", "oneday")
    words = (*DURATION_WORDS, *glued)
    texts = [*real_texts(), *("".join(rng.choice(words) + rng.choice((" ", "-", ". ", "", "\n"))
                                      for _ in range(rng.randint(1, 12)))
                              for _ in range(8000))]
    found = 0
    for text in texts:
        folded = claims._Folded.of(text)
        if folded is None:
            continue
        got = list(folded.durations())
        assert got == [m.span() for m in claims._DURATION.finditer(text)], text
        found += bool(got)
    assert found > 3000


def test_unit_forms_are_the_unit_words_without_a_digit() -> None:
    """``_UNIT_FORMS`` (looked up in the fold's vocabulary) holds exactly the words
    ``_UNIT_WORD`` matches that do not open with a digit; the others open with one,
    so a letter follows a digit in the text (the scan's gate for searching them)."""
    rng = random.Random(13)
    leads = ("", "a", "an", "one", "twelve", "many", "yester", "to", "5", "12", "x", "ten5",
             "ago", "sev", "s")
    units = ("second", "seconds", "hour", "days", "year", "years", "centuries", "century",
             "centurys", "decade", "decadess", "month", "week", "weeks", "yea", "s", "")
    candidates = {(a + b).encode() for a in leads for b in units}
    candidates |= {w.encode() for t in list(real_texts_words()) for w in t}
    candidates |= set(_claim_scan._UNIT_FORMS)
    candidates |= {bytes(rng.choices(b"ayds0e5rnt", k=rng.randint(1, 9))) for _ in range(20000)}
    for word in candidates:
        matched = _claim_scan._UNIT_WORD.fullmatch(word) is not None
        if word[:1].isdigit():
            assert word not in _claim_scan._UNIT_FORMS
        else:
            assert (word in _claim_scan._UNIT_FORMS) is matched, word


def real_texts_words() -> list[list[str]]:
    from corpus_texts import real_texts

    table = bytes(c if 0x30 <= c <= 0x39 or 0x61 <= c <= 0x7A else 0x20 for c in range(256))
    return [t.lower().encode("ascii", "replace").translate(table).decode().split()
            for t in real_texts()]


def test_labels_of_disjoint_sentences_are_the_classifier() -> None:
    """``claims_brief._labels`` (each phrase start bisected to its sentence) gives
    ``classify`` of each sentence: on every labelled text's answer sentences and on
    random texts cut at random places, inside words too (ascending spans only)."""
    from corpus_texts import real_texts

    rng = random.Random(10)
    texts = [*real_texts(), *random_texts(502, 1500)]
    seen = set()
    for text in texts:
        folded = _claim_scan._Folded.of(text)
        if folded is None:
            continue
        for spans in ([a.span for a in analyze_answer(text)],
                      sorted(random_spans(rng, text), key=lambda s: (s.start, s.end))):
            want = [classify(s.text) for s in spans]
            assert claims_brief._labels(folded, spans) == want, (text, spans)
            seen.update(want)
    assert seen == {"verifiable", "hedged", "opinion"}
