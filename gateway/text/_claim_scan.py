"""Fast scanning for the claim detector: where each of its patterns can match.

Private to :mod:`gateway.text.claims`, which imports what it uses from here (and
re-exports the names its tests read). It holds the claims patterns
(:data:`REGULATORY_PATTERNS`, ``_DURATION``, ``_OPINION``, ``_HEDGE`` and their ASCII
twins) and ``_Folded``, which finds the candidate positions for each of them.

Speed: the regex engine costs tens of nanoseconds per character and pattern, so the
patterns are not run over the whole text. The case-insensitive ones run on the
lower-cased text (see ``_Folded``: exact unless the text has "İ", "ı" or "ſ", which
take the plain path), and each only where a literal that every one of its matches
contains occurs — found with ``str.find`` and a set of the text's words: a
regulation pattern is tried at each occurrence of its opening literal, the
opinion and hedge patterns where one of their phrases starts, and the duration
pattern scans only the few words around each plausible unit word. Since every match
contains the literal, none is missed; and each pattern is run at a candidate with the
text around it unchanged (``match`` at ``pos`` sees the characters before it, as
``finditer`` does), so the results are exactly those of the plain patterns over the
whole text (each method's docstring says why; tests/text/test_claims_fast.py).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, AnyStr

from gateway.text.tokens import Span

if TYPE_CHECKING:
    from gateway.text.claims import Classification

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
_REGULATORY_FOLDED = re.compile(r"dfars|nist|cmmc|federal acquisition|cybersecurity maturity"
                                r"|international traffic|export administration")
"""The hint's case-insensitive half, for lower-cased ASCII text (its cased half is
:func:`_cased_hint`): a pattern that opens with a literal lets the engine jump between
candidate first letters."""


def _cased_hint(text: str) -> bool:
    """The hint's case-sensitive half: ``DFARS|FAR|NIST|CMMC|ISO|ITAR|EAR|C\\.?F\\.?R``
    occurs in ``text``, by substring tests (the pattern has no anchor, so the regex
    engine tried it at every position; tests/text/test_claims_fast.py holds the two
    alike)."""
    if "F" in text and ("FAR" in text or "CFR" in text or "CF.R" in text or "C.FR" in text
                        or "C.F.R" in text):
        return True
    # One letter of each first (a one-character test is a memchr, a longer one a scan).
    return (("N" in text and "NIST" in text) or ("M" in text and "CMMC" in text)
            or ("O" in text and "ISO" in text)
            or ("R" in text and ("ITAR" in text or "EAR" in text)))


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

# Fast paths (see "Speed" in the module docstring): every match of each pattern below
# contains a literal, and the pattern is only run where one occurs.
_REGULATORY_FLAT = tuple(p for patterns in REGULATORY_PATTERNS.values() for p in patterns)
_REGULATORY_LEADS: tuple[tuple[str | None, bool, bytes | None], ...] = (
    ("dfars", True, None), ("defense federal acquisition regulation", True, b"defense"),
    ("FAR", False, None), ("federal acquisition regulation", True, b"federal"),
    ("nist", True, None), ("nist", True, None), ("NIST", False, None),
    ("cmmc", True, None), ("cybersecurity maturity model certification", True, b"cybersecurity"),
    ("ISO", False, None),
    ("ITAR", False, None), ("international traffic in arms regulation", True, b"international"),
    ("EAR", False, None), ("export administration regulation", True, b"export"),
    (None, False, None),
)
"""Per pattern of :data:`REGULATORY_PATTERNS`, in order: the literal it opens with after
``\\b`` (lower case if the pattern ignores case, the second field), and the literal's
first word when it is always a whole word; ``None`` for the CFR pattern."""
_CI_KEYS = tuple(sorted({(lead or "").encode() for lead, ci, w in _REGULATORY_LEADS
                         if ci and w is None}))
_CI_WORDS = frozenset(w for lead, ci, w in _REGULATORY_LEADS if ci and w is not None)
"""What :meth:`_Folded.regulations` tries a case-insensitive pattern on: its literal in
``words`` (``_CI_KEYS``) or its first word in ``vocab`` (``_CI_WORDS``); with neither
(and no cased acronym) it tries none (cheaper than one regex alternation of them)."""
_WORD_BYTES = bytes(c if 0x30 <= c <= 0x39 or 0x61 <= c <= 0x7A else 0x20 for c in range(256))
"""``bytes.translate`` table blanking everything but ``[a-z0-9]``."""
_GLUED_UNITS = (b"second", b"minute", b"hour", b"day", b"week", b"month", b"year", b"decade",
                b"centur")
"""The :data:`_DURATION_UNITS` a number may precede without a space ("5years")."""
_WORD_UNITS = (b" season ", b" tomorrow ", b" spring ", b" summer ", b" autumn ", b" fall ",
               b" winter ")
"""The other :data:`_DURATION_UNITS`: _DURATION only matches them as whole words."""
_WORD_UNIT_WORDS = tuple(unit[1:-1] for unit in _WORD_UNITS)
_UNIT_WORD = re.compile(
    rb"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|"
    rb"twenty|thirty|forty|fifty|several|few|many|yester|to)?"
    rb"(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|centuries|century)"
)
"""The ``[a-z0-9]`` word around a glued unit, when a duration match uses that unit."""
_UNIT_FORMS = frozenset(
    lead + unit for lead in b" a an one two three four five six seven eight nine ten eleven "
    b"twelve fifteen twenty thirty forty fifty several few many yester to".split(b" ")
    for unit in b"second seconds minute minutes hour hours day days week weeks month months "
    b"year years decade decades centuries century".split())
"""The words :data:`_UNIT_WORD` matches that do not open with a digit (its other words
are a digit run and a unit: "5years")."""
_UNIT_VOCAB = _UNIT_FORMS | frozenset(_WORD_UNIT_WORDS)
_SHAPE = bytes(0x30 if 0x30 <= c <= 0x39 else 0x61 if 0x61 <= c <= 0x7A else 0x20
               for c in range(256))
"""``bytes.translate`` table of ``words``: every digit "0", every letter "a"."""
_SPANNING = re.compile(
    rb".*\d(?:st|nd|rd|th)?"
    rb"|(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|"
    rb"twenty|thirty|forty|fifty|several|few|many)?"
    rb"(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|centuries|century)"
    rb"|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    rb"thirty|forty|fifty|several|few|many|last|next|this|previous|following|since|until|by|"
    rb"before|after|in|during|the|spring|summer|autumn|fall|winter|of"
)
"""The ``[a-z0-9]`` words a duration match may go on after, across whitespace or "-"
(a number, ordinal, unit, or a word of the pattern followed by ``\\s``)."""
_SPANNING_WORDS = frozenset(
    b"a an one two three four five six seven eight nine ten eleven twelve fifteen twenty "
    b"thirty forty fifty several few many last next this previous following since until by "
    b"before after in during the spring summer autumn fall winter of".split()
)
_SPANNING_ENDS = (b"s", b"y", b"st", b"nd", b"rd", b"th", b"second", b"minute", b"hour",
                  b"day", b"week", b"month", b"year", b"decade")
"""For speed: words ``_SPANNING`` matches, and how all others it matches end (or in a
digit)."""


_Phrase = tuple[frozenset[bytes], bytes]
_PhraseTable = tuple[frozenset[bytes], dict[bytes, tuple[_Phrase, ...]]]
"""Phrases by one of their words (the longest): the set of those words, and each one's
phrases as ``(its words, b" phrase ")``."""


def _phrases(alternatives: str) -> _PhraseTable:
    """The :data:`_PhraseTable` of the ``|``-separated phrases."""
    by_key: dict[bytes, tuple[_Phrase, ...]] = {}
    for p in alternatives.split("|"):
        words = p.encode().split()
        key = max(words, key=len)
        by_key[key] = (*by_key.get(key, ()), (frozenset(words), f" {p} ".encode()))
    return frozenset(by_key), by_key


_OPINION_PHRASES = _phrases(
    "in my opinion|in my view|in my experience|i think|i believe|i feel|i guess|i suppose|"
    "i prefer|i love|i like|i hate|i enjoy|personally|imo|to me|my favorite|my favourite|"
    "i d say|i would say|should|ought to|too strict|too lenient|too expensive|too long|"
    "too short|too much|too many|overrated|underrated|the best|the worst|beautiful|amazing|"
    "awesome|terrible|awful|wonderful|boring|great"
)
"""Every match of ``_OPINION`` is one of these, words as in :func:`_fold` ("i'd" is "i d")."""
_HEDGE_PHRASES = _phrases(
    "may|might|could|possibly|perhaps|probably|likely|unlikely|reportedly|allegedly|"
    "approximately|roughly|around|about|some|estimated|estimates|estimate|suggests|suggest|"
    "appears|appear|seems|seem|apparently|presumably|arguably|it is believed|it is thought|"
    "it is said|not sure|up to|as many as|nearly|almost|more than|less than|at least"
)
"""Every match of ``_HEDGE`` starts with one of these (``"about 30"``: ``about``)."""


_ASKED = frozenset().union(
    *(words for _, by_key in (_OPINION_PHRASES, _HEDGE_PHRASES)
      for phrases in by_key.values() for words, _ in phrases),
    _CI_WORDS, _UNIT_VOCAB)
"""Every word :attr:`_Folded.vocab` is asked about: the phrases' words (their keys
among them), the regulations' first words and the unit words."""


def _occurrences(text: AnyStr, literal: AnyStr) -> Iterator[int]:
    """Every start of ``literal`` in ``text``, overlapping ones included, ascending."""
    i = text.find(literal)
    while i >= 0:
        yield i
        i = text.find(literal, i + 1)


class _Folded:
    """A text prepared for the fast paths: the case-insensitive patterns' lower-case
    copies are run on :attr:`low`, and only where :attr:`words` shows a literal that
    every match contains.

    ``low`` is ``text.lower()``. On ASCII text, matching it case-sensitively with the
    lower-case copies is exactly matching ``text`` ignoring case; on other text too
    when lower-casing keeps the length (only "İ" grows) and there is no dotless "ı"
    or long "ſ" (IGNORECASE matches them to i / s, lower() keeps them): for every
    other character c, c matches a pattern character ignoring case iff ``c.lower()``
    equals it, and ``c.lower()`` is a word / digit / space character iff c is
    (checked over all of Unicode in tests/text/test_claims_fast.py).
    :meth:`of` returns ``None`` for the rest.

    ``words`` is ``low`` as bytes, one per character (offsets unchanged), with
    everything but ``[a-z0-9]`` blanked: every ASCII whole word (``\\b...\\b``) of
    ``low`` is a word of it, so :attr:`vocab` (its set of words) has it, and
    ``padded`` (``words`` between two blanks) contains it as ``b" word "``. Only the
    words of :data:`_ASKED` are ever looked up in ``vocab``, so it holds only those
    (building the set of every word cost more than splitting the text).
    """

    __slots__ = ("low", "words", "padded", "vocab")

    def __init__(self, low: str) -> None:
        self.low = low
        self.words = low.encode("ascii", "replace").translate(_WORD_BYTES)
        self.padded = b" " + self.words + b" "
        self.vocab = _ASKED.intersection(self.words.split())

    @classmethod
    def of(cls, text: str) -> _Folded | None:
        low = text.lower()
        if text.isascii() or (len(low) == len(text)
                              and "\u0131" not in text and "\u017f" not in text):
            return cls(low)
        return None

    def phrase_starts(self, phrases: _PhraseTable) -> list[int]:
        """Ascending starts in ``low`` of the whole-word ``phrases`` (a superset of
        their regex matches' starts). Only the phrases whose key word the text has are
        looked at (a per-request scan of every phrase cost ~1 % of a verification)."""
        vocab, padded = self.vocab, self.padded
        keys, by_key = phrases
        return sorted({p for key in vocab & keys for words, phrase in by_key[key]
                       if vocab.issuperset(words) for p in _occurrences(padded, phrase)})

    def regulations(self, text: str) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of every match of :data:`REGULATORY_PATTERNS`, pattern by
        pattern in order, each pattern's as ``finditer`` gives them.

        All but the CFR pattern open with ``\\b`` and a literal: they can only match
        where it occurs, so each is tried there alone (``match`` at ``pos`` sees the
        characters before it, as ``finditer`` does)."""
        cased = _cased_hint(text)  # every case-sensitive one needs it
        words = self.words
        if not cased and self.vocab.isdisjoint(_CI_WORDS):
            for key in _CI_KEYS:  # (a loop: any() of a generator cost ~1 k more)
                if key in words:
                    break
            else:
                return  # no pattern would be tried below (most answers)
        for pat, (lead, ci, word) in zip(_REGULATORY_FLAT, _REGULATORY_LEADS, strict=True):
            if lead is None:
                if cased:
                    yield from (m.span() for m in pat.finditer(text))
                continue
            if ci:
                key = lead.encode()
                if (key not in self.words) if word is None else (word not in self.vocab):
                    continue
                starts: Iterable[int] = _occurrences(self.words, key)
            elif cased and lead in text:
                starts = _occurrences(text, lead)
            else:
                continue
            end = 0
            for p in starts:
                if p >= end and (m := pat.match(text, p)) is not None:
                    end = m.end()
                    yield p, end

    def durations(self) -> Iterator[tuple[int, int]]:
        """``_DURATION_ASCII.finditer(low)`` spans, scanning only around the units a
        match could use.

        Every match contains a unit of :data:`_DURATION_UNITS` in its ``[a-z0-9]``
        word (:data:`_UNIT_WORD`, or a whole word of :data:`_WORD_UNITS`). Around each
        such unit the pattern runs from the nearest word end before it to the nearest
        after it where no match can go on (:meth:`_stops`): such ends split ``low``
        into pieces that no match spans, and no match sees past either end.

        The unit words are found as whole words of :attr:`vocab` (:data:`_UNIT_VOCAB`)
        unless a letter follows a digit somewhere (a word may then be a number glued
        to a unit, which no finite set holds): then each glued unit is searched for.
        """
        words, n = self.words, len(self.low)
        hits: list[tuple[int, int]] = []  # (start, end) of the unit's word
        padded = self.padded
        if b"0a" in words.translate(_SHAPE):  # a letter after a digit: maybe "5years"
            for unit in _GLUED_UNITS:
                if unit not in words:  # (most)
                    continue
                for u in _occurrences(words, unit):
                    st = words.rfind(b" ", 0, u) + 1
                    en = words.find(b" ", u)
                    if en < 0:
                        en = n
                    if _UNIT_WORD.fullmatch(words, st, en):
                        hits.append((st, en))
            units = self.vocab.intersection(_WORD_UNIT_WORDS)
        else:  # each such word is a whole word of vocab (cheaper than a test per unit)
            units = self.vocab & _UNIT_VOCAB
        for word in units:
            hits.extend((p, p + len(word)) for p in _occurrences(padded, b" " + word + b" "))
        done = 0
        for first, en in sorted(hits):
            if first < done:
                continue
            st, end = first, 0  # back word by word from the unit's word
            while st:
                c = st - 1  # words[c] is a blank: find the previous word's end
                while c and words[c - 1] == 32:
                    c -= 1
                if not c:
                    break
                st = words.rfind(b" ", 0, c) + 1
                if self._stops(c, st):
                    end = c
                    break
            st, done = first, en  # forward word by word
            while done < n and not self._stops(done, st):
                st = done
                while st < n and words[st] == 32:
                    st += 1
                done = words.find(b" ", st)
                if done < 0:
                    done = n
            for m in _DURATION_ASCII.finditer(self.low, end, done):
                yield m.span()

    def _stops(self, c: int, start: int) -> bool:
        """Whether no duration match contains both ``low[c - 1]``, the last character
        of the word ``words[start:c]``, and ``low[c]`` (a blank there), and one ending at
        ``c`` sees the same ``\\b`` there (``low[c]`` is no word character).

        Inside a match, "." only follows a digit, and whitespace or "-" only follows a
        number, a unit, an ordinal or a word of :data:`_SPANNING`; other punctuation
        never occurs."""
        b = self.low[c]
        if b.isalnum() or b == "_":  # the regex engine's \w
            return False
        if b == ".":
            return not self.low[c - 1].isdecimal()
        if b == "-" or b.isspace():
            word = self.words[start:c]
            if word in _SPANNING_WORDS or 48 <= word[-1] <= 57:  # ... or ends in a digit
                return False
            return not (word.endswith(_SPANNING_ENDS) and _SPANNING.fullmatch(word))
        return True

    def classifier(self, sentences: Sequence[Span]) -> Callable[[int], Classification]:
        """``classify(sentences[i].text)`` for each ``i`` (each ``text[start:end]``).

        Every match of ``_OPINION`` / ``_HEDGE`` starts with one of their phrases
        (:data:`_OPINION_PHRASES`, :data:`_HEDGE_PHRASES`), so they are only tried
        where one starts, on ``low`` with ``endpos`` at the sentence end: the same as
        searching the sentence alone when the character before it is no word
        character. A sentence that starts or ends inside a word is searched alone."""
        low, n = self.low, len(self.low)
        opinion = self.phrase_starts(_OPINION_PHRASES)
        hedge = self.phrase_starts(_HEDGE_PHRASES)

        def label(i: int) -> Classification:
            s, e = sentences[i].start, sentences[i].end
            if (s and (low[s - 1].isalnum() or low[s - 1] == "_")) or (
                    e < n and (low[e].isalnum() or low[e] == "_")):  # inside a word
                piece = low[s:e]
                return ("opinion" if _OPINION_ASCII.search(piece) else
                        "hedged" if _HEDGE_ASCII.search(piece) else "verifiable")
            for p in opinion[bisect_left(opinion, s):bisect_left(opinion, e)]:
                if _OPINION_ASCII.match(low, p, e):
                    return "opinion"
            for p in hedge[bisect_left(hedge, s):bisect_left(hedge, e)]:
                if _HEDGE_ASCII.match(low, p, e):
                    return "hedged"
            return "verifiable"

        return label


def _may_cite_regulation(text: str, ascii_low: str | None) -> bool:
    """``_REGULATORY_HINT.search(text)``; ``ascii_low`` is ``text.lower()`` if ASCII."""
    if ascii_low is None:
        return _REGULATORY_HINT.search(text) is not None
    return _cased_hint(text) or _REGULATORY_FOLDED.search(ascii_low) is not None
