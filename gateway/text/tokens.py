"""Shared, model-free text helpers: sentences, tokens, content words, entity candidates.

Everything here is a pure function over ``str``; regexes and word lists are
compiled once at import and never mutated. Numbers and dates live in
:mod:`gateway.text.quantities`.

Conventions
-----------
- A *token* is a lower-cased run of letters/digits; punctuation (including
  apostrophes and hyphens) separates tokens, so ``"Neptune's"`` gives
  ``["neptune", "s"]`` and ``"X-Men"`` gives ``["x", "men"]``.
- Glued words such as ``"RomanceStep"`` (a lower-case letter directly followed by
  an upper-case one, common in scraped text) are split into two tokens, on both
  sides of any comparison, so matching stays symmetric.
- A *content word* is a token of two or more characters that is not a stopword,
  not a number word and has no digit (numbers are compared by
  :mod:`gateway.text.quantities`).
- :func:`variants` gives the few surface forms under which a content word may
  appear elsewhere (plural, -ed, -ing); it replaces stemming on the hot path,
  so a long context is never stemmed word by word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "NEGATIONS",
    "NON_CONTENT",
    "NUMBER_WORDS",
    "OPENERS",
    "PLACES",
    "STOPWORDS",
    "TO_SPACE",
    "Span",
    "camel_glue_positions",
    "content_words",
    "entity_candidates",
    "has_camel_glue",
    "has_negation",
    "irregular_group",
    "negation_cues",
    "punct_to_space",
    "split_sentences",
    "tokenize",
    "variants",
]

# fmt: off
STOPWORDS: frozenset[str] = frozenset("""
a about above after again against all also although am among an and any are aren as at
be because been before being below between both but by can cannot could couldn did didn
do does doesn doing don down during each either else even ever every few for from further
had hadn has hasn have haven having he her here hers herself him himself his how however
i if in into is isn it its itself just ll me might mine more most much must mustn my myself
neither nor not now of off on once only or other our ours ourselves out over own re s same
shall shan she should shouldn so some such t than that the their theirs them themselves then
there these they this those though through thus to too under until up upon us ve very was
wasn we were weren what when where whether which while who whom whose why will with within
without won would wouldn yet you your yours yourself yourselves d m o y ain let lets
yes no not nope yeah yep ok okay oh ah hi hello hey please thanks thank sure well
really actually just quite rather pretty maybe perhaps indeed certainly definitely
like likes liked know knew known think thought thinks say said says tell told get got gets
go goes went gone going make made makes see seen saw want wanted wants need needs
thing things something anything everything nothing one ones lot lots kind sort way
many several various another others still already again always never often sometimes
here there now today yesterday tomorrow also too very much more most less least
good great nice cool awesome fun interesting favorite favourite
about approximately approx around roughly nearly almost circa
""".split())
# fmt: on

NUMBER_WORDS: frozenset[str] = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion trillion dozen half percent".split()
)
"""Spelled-out number words: compared as numbers (:mod:`gateway.text.quantities`), not as words."""
NON_CONTENT: frozenset[str] = STOPWORDS | NUMBER_WORDS
"""The words :func:`content_words` drops by name (stopwords and number words)."""

PLACES: frozenset[str] = frozenset(
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
"""Lower-case names of countries, US states and large cities: a gazetteer of lone
place names (``claims`` entity typing, ``citations`` telling ``(Paris, 1889)`` from a
citation)."""

NEGATIONS: frozenset[str] = frozenset(
    "not no never none nobody nothing neither nor cannot without n't isn wasn aren weren "
    "don doesn didn won wouldn couldn shouldn hasn haven hadn ain".split()
)

# Punctuation -> space, so ``str.split`` tokenizes at C speed (no per-token regex).
_PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~“”‘’–—…«»·•£€¥§°′″"
TO_SPACE = str.maketrans({c: " " for c in _PUNCT})
"""``str.translate`` table used by :func:`tokenize` (punctuation -> space)."""
_PUNCT_RE = re.compile("[" + re.escape(_PUNCT) + "]")
_ASCII_TO_SPACE = bytes(32 if i < 128 and chr(i) in _PUNCT else i for i in range(256))
"""``TO_SPACE`` as a ``bytes.translate`` table, for ASCII text."""


def punct_to_space(text: str) -> str:
    """``text.translate(TO_SPACE)``, fast on any text: ``str.translate`` is quick only on
    ASCII (about 100x slower once one non-ASCII character is present, e.g. a no-break
    space or a curly quote); there, one regex substitution does the same at C speed.
    ASCII text goes through ``bytes.translate`` (a plain 256-byte table: several times
    cheaper per call than ``str.translate``'s per-character table look-ups)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_TO_SPACE).decode("ascii")
    return _PUNCT_RE.sub(" ", text)

_CAMEL_GLUE = re.compile(r"(?<=[a-z])(?=[A-Z][a-z])")
# Same test, starting at the capital: a pattern that opens with a character class gets
# the regex engine's fast scan to the (rare) capitals instead of an attempt per letter.
_CAMEL_ANY = re.compile(r"[A-Z](?<=[a-z][A-Z])(?=[a-z])")
# A cue's first letter read by a case-sensitive class (the engine skips to those letters
# with its fast scan: a case-insensitive class or a look-ahead gets none), the rest
# case-insensitive; "(?<!\w.)" is the "\b" before that letter. The same matches as the
# look-ahead form (tests/text/test_answer_pass_fast.py).
_NEG_RE = re.compile(
    r"[ncwfNCWF](?i:(?<!\w.)(?:(?<=n)(?:ot|o|ever|one|obody|othing|either|or)\b"
    r"|(?<=c)annot\b|(?<=w)ithout\b|(?<=f)ail(?:s|ed)?\s+to\b)|(?<=n)[’']t\b)")

# Sentence ends: terminal punctuation + space + an opener, a glued ".Capital" after a
# lower-case word of 2+ letters (scraped text), or a line break.
_ABBREV: frozenset[str] = frozenset(
    "mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt gov sen rep rev inc ltd co corp vs "
    "etc no vol fig approx dept est jan feb mar apr jun jul aug sep sept oct nov dec e.g i.e "
    "u.s u.k u.n a.m p.m".split()
)
# A sentence end: ``[.!?](?:["')\]’”]*\s+|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]))|\n\s*``.
# Each candidate starts at its punctuation mark or line break, so the scanner can jump
# between those few characters (a charset prefix) instead of trying every position --
# but the engine finds that prefix only in a pattern that opens with one character
# class (not in a choice between two), so the branch is picked by a look-behind at the
# mark (same matches, 1.6x faster on news prose).
_SENT_END = re.compile(
    r"[.!?\n](?:(?<=[.!?])(?:[\"')\]’”]*\s+|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]))"
    r"|(?<=\n)\s*)"
)
_WORD_BEFORE = re.compile(r"([\w.]+)[.!?][\"')\]’”]*$")
_UNIT_BEFORE = re.compile(r"\d\s?[°º]?$")

_CAP_WORD = r"(?:[A-Z][\w’'&.-]*\w\.?|[A-Z]\.?)"
_CONNECT = r"(?:of|of the|de|da|del|der|van|von|la|le|du|bin|al)"
# ``\b{_CAP_WORD}…`` with the boundary tested after the first capital (the character
# before it is no word character; both branches of _CAP_WORD open with the capital): a
# pattern opening with a character class gets the engine's fast scan to the capitals
# instead of an attempt at every character (3x faster, the same matches).
_ENTITY = re.compile(
    rf"[A-Z](?<!\w.)(?:[\w’'&.-]*\w\.?|\.?)(?:[ \t]+(?:{_CONNECT}[ \t]+)*{_CAP_WORD})*"
    r"(?:[ \t]+[0-9]+\b)?"
)
_CONNECT_RE = re.compile(_CONNECT)
_LEADING_PUNCT = " \t\"'([‘“-"
# Words that are capitalized only because they open a sentence or an utterance.
OPENERS: frozenset[str] = STOPWORDS | frozenset(
    "gladly hope sorry thanks great well sure absolutely exactly right wow yes no oh "
    "after before during since while although because if when where according however "
    "also additionally furthermore moreover besides instead meanwhile overall unfortunately "
    "fortunately interestingly apparently recently currently today yesterday tomorrow "
    "many most some several few all both each every this that these those there here it "
    "his her their our my your its one two three four five first second last next another "
    "in on at by for from with of to as about approximately around roughly nearly almost "
    "just over under up only".split()
)


# Irregular verb forms -> their other forms (both directions are listed).
_IRREGULAR_GROUPS = (
    "send sent sends sending", "give gave given gives giving", "take took taken takes taking",
    "make made makes making", "go went gone goes going", "come came comes coming",
    "see saw seen sees seeing", "find found finds finding", "tell told tells telling",
    "say said says saying", "get got gotten gets getting", "know knew known knows",
    "think thought thinks", "buy bought buys", "bring brought brings", "catch caught",
    "teach taught", "fight fought", "hold held holds", "keep kept keeps", "leave left leaves",
    "lose lost loses losing", "meet met meets", "pay paid pays paying", "sell sold sells",
    "win won wins winning", "write wrote written writes writing", "begin began begun begins",
    "break broke broken", "choose chose chosen", "drive drove driven", "eat ate eaten",
    "fall fell fallen", "fly flew flown", "grow grew grown", "hide hid hidden", "lead led leads",
    "rise rose risen", "run ran runs running", "speak spoke spoken", "steal stole stolen",
    "strike struck strikes", "swim swam swum", "throw threw thrown", "wear wore worn",
    "build built builds", "feel felt feels", "hear heard hears", "mean meant means",
    "spend spent spends", "stand stood stands", "understand understood", "die died dead death",
    "born birth bear bore", "child children", "man men", "woman women", "person people",
    "shoot shot shoots", "sit sat sits", "sleep slept", "bite bit bitten", "sing sang sung",
    "sink sank sunk", "sting stung stings", "forbid forbade forbidden", "freeze froze frozen",
)
_IRREGULAR: dict[str, str] = {
    form: group for group in _IRREGULAR_GROUPS for form in group.split()
}


def irregular_group(word: str) -> str | None:
    """The first form of ``word``'s irregular group ("began" -> "begin", "men" -> "man"),
    or ``None`` when it has none."""
    group = _IRREGULAR.get(word)
    return group.split(None, 1)[0] if group is not None else None


@dataclass(slots=True, unsafe_hash=True)
class Span:
    """A slice of some text: ``text == source[start:end]``.

    A value: never mutated, hashable. Not ``frozen`` only because a frozen dataclass
    builds three times slower and a long context makes thousands of these.
    """

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[Span]:
    """Split ``text`` into sentences (with offsets into ``text``).

    Handles ``". "``/``"! "``/``"? "`` followed by a capital or digit, sentences glued
    without a space (``"Game.Andre"``), line breaks, and common abbreviations
    (``"Dr."``, ``"U.S."``, initials such as ``"J. K."``). Empty pieces are dropped.
    """
    out: list[Span] = []
    start = 0
    for m in _SENT_END.finditer(text):
        gap = m[0]
        mark, end = m.span()
        # The sentence ends after the mark (a line break: where the break starts;
        # the whitespace is trimmed either way).
        if gap[0] == "\n":
            cut = mark
        else:
            cut = mark + 1
            if "\n" not in gap and not _split_ok(text, cut, end):
                continue
        # `_append_span(out, text, start, cut)`, inline (once per sentence).
        piece = text[start:cut]
        kept = piece.strip()
        if kept:
            if len(kept) != len(piece):
                start += len(piece) - len(piece.lstrip())
            out.append(Span(kept, start, start + len(kept)))
        start = end
    _append_span(out, text, start, len(text))
    return out


def _split_ok(text: str, cut: int, end: int) -> bool:
    """Reject candidate ends before lower case, after abbreviations and initials."""
    nxt = text[end:end + 2].lstrip("\"'([‘“")
    if not nxt or not (nxt[0].isupper() or nxt[0].isdigit()):
        return False
    # The word before the mark: the run of [\w.] characters ending there, at most 11
    # of them. Common case without a regex: the chunk after the last space is letters
    # only (so it is that whole run).
    seg = text[max(0, cut - 12):cut - 1]
    word = seg.rsplit(None, 1)[-1] if seg and not seg[-1].isspace() else ""
    if not word.isalpha():
        before = _WORD_BEFORE.search(text, max(0, cut - 12), cut)
        if before is None:
            return True
        word = before.group(1)
    if word.lower().rstrip(".") in _ABBREV:
        # "No." abbreviates "number" only before one ("No. 5"); "No. The leaflet…" ends.
        return word.lower() == "no" and not nxt[0].isdigit()
    if word == "al" and text[max(0, cut - 7):cut - 3].lower().endswith("et "):
        return False  # "Smith et al. (2020) found", "et al. Their study"
    # "J. K. Rowling" / "Craig T. Nelson": a lone capital before the dot is an initial.
    if len(word) == 1 and word.isupper():
        # A unit symbol after a number ends a sentence: "rated at 230 V. The range…",
        # "up to 60 °C. Store…"; elsewhere a lone capital is an initial.
        return _UNIT_BEFORE.search(text, max(0, cut - 8), cut - 2) is not None
    return True


def _append_span(out: list[Span], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    kept = piece.strip()  # str.strip() strips exactly the characters str.isspace() accepts
    if kept:
        if len(kept) != len(piece):
            start += len(piece) - len(piece.lstrip())
        out.append(Span(kept, start, start + len(kept)))


def tokenize(text: str) -> list[str]:
    """Lower-cased tokens of ``text`` (see the module docstring for the rules)."""
    if _CAMEL_ANY.search(text):
        text = _CAMEL_GLUE.sub(" ", text)
    return punct_to_space(text.lower()).split()


def content_words(tokens: list[str] | set[str] | frozenset[str]) -> set[str]:
    """The distinct content words among ``tokens`` (no stopwords, no numbers, len >= 2)."""
    # One pass over the tokens as given (the set comprehension drops repeats): no set of
    # them and no two set differences built first (≈ 2x faster on an answer sentence).
    return {
        t for t in tokens
        if t not in NON_CONTENT and len(t) > 1
        and (t.isalpha() or not any(c.isdigit() for c in t))
    }


@lru_cache(maxsize=1 << 16)
def variants(word: str) -> tuple[str, ...]:
    """Surface forms under which ``word`` may appear elsewhere (itself first).

    A light, symmetric substitute for stemming: ``"released"`` -> ``"release",
    "releases", "releasing", …``; ``"countries"`` -> ``"country"``. Only applied to
    the (short) answer, never to the context.
    """
    forms = [word, word + "s", word + "es"]
    irregular = _IRREGULAR.get(word)
    if irregular:
        forms += irregular.split()
    if word.endswith("ies") and len(word) > 4:
        forms.append(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        forms.append(word[:-2])
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        forms.append(word[:-1])
    if word.endswith("y") and len(word) > 3:
        forms.append(word[:-1] + "ies")
    stem = word
    for suf in ("ing", "ed", "er", "ers", "ion", "ions", "ly", "al", "ally"):
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            stem = word[: -len(suf)]
            break
    if stem != word:
        forms += [stem, stem + "e", stem + "ed", stem + "es", stem + "s", stem + "ing"]
        if len(stem) > 3 and stem[-1] == stem[-2]:  # "stopped" -> "stop"
            forms += [stem[:-1], stem[:-1] + "s"]
    else:
        base = word[:-1] if word.endswith("e") else word
        forms += [base + "ed", base + "ing", word + "d", base + "ion", base + "er", word + "ly"]
    return tuple(dict.fromkeys(forms))


def has_negation(text: str) -> bool:
    """Whether ``text`` contains a negation cue (not, no, never, n't, without, …)."""
    return _NEG_RE.search(text) is not None


def negation_cues(text: str) -> Iterator[re.Match[str]]:
    """Every negation cue in ``text`` (the matches behind :func:`has_negation`)."""
    return _NEG_RE.finditer(text)


def camel_glue_positions(text: str) -> Iterator[int]:
    """Offsets of the capitals where :func:`tokenize` splits a glued ``"wordWord"``."""
    return (m.start() for m in _CAMEL_ANY.finditer(text))


def has_camel_glue(text: str) -> bool:
    """Whether :func:`tokenize` would split a glued ``"wordWord"`` somewhere in ``text``."""
    return _CAMEL_ANY.search(text) is not None


def entity_candidates(sentence: str) -> list[Span]:
    """Capitalized spans of one sentence that may name an entity.

    Runs of capitalized words (joined by short lower-case connectors: ``"University
    of Texas"``, ``"Once Upon a Time in America"``), initials (``"Craig T. Nelson"``,
    ``"J.K. Rowling"``), acronyms (``"NFL"``) and number-bearing names (``"X-Men 2"``,
    ``"F-35"``). Leading words capitalized only because they open the sentence
    (``"The"``, ``"Gladly"``) or that are stopwords (``"I"``) are dropped, and so are
    trailing connectors and a trailing full stop. A single ordinary word opening the
    sentence is not a candidate (it is indistinguishable from "Despite", "Sadly").
    """
    out: list[Span] = []
    # Offsets up to ``lead`` are the sentence's opening: only leading punctuation before.
    lead = len(sentence) - len(sentence.lstrip(_LEADING_PUNCT))
    for m in _ENTITY.finditer(sentence):
        g = m[0]
        if " " not in g and "\t" not in g:
            # One word (most matches), the steps below for it alone: it opens with a
            # capital [A-Z], so it is no connector and keeps its first letter.
            low = g.lower()
            if low in STOPWORDS:
                continue
            base = m.start()
            if base <= lead and (low in OPENERS or not (g.isupper() and len(g) > 1)
                                 and not any(map(str.isdigit, g))):
                continue
            # The word ends with a word character or the capital, and at most one "."
            # after it (the pattern): that "." is the trailing punctuation to drop.
            if g[-1] == ".":
                g = g[:-1]
            if len(g) < 2 and not g.isupper():
                continue
            out.append(Span(g, base, base + len(g)))
            continue
        base = m.start()
        # Several words: ``g`` holds no whitespace but spaces and tabs (the pattern), so
        # its words are ``g.split()``; words[i:j] are kept, offsets found at the end.
        words = g.split()
        i, j = 0, len(words)
        at_start = opening = base <= lead
        while i < j:
            first = words[i].lower()
            if first in STOPWORDS or (at_start and first in OPENERS):
                i += 1
                at_start = False
                continue
            break
        if opening and j - i == 1 and i == 0:
            word = words[0]
            if not (word.isupper() and len(word) > 1) and not any(map(str.isdigit, word)):
                continue  # "Despite ...", "Zebeto, who ...": capitalized only as an opener
        # (Every connector starts with a lower-case letter: a capitalized last word or a
        # number is none, and no pattern call is needed to say so.)
        while j > i and words[j - 1][0].islower() and _CONNECT_RE.fullmatch(words[j - 1]):
            j -= 1
        if i == j or not words[i][0].isupper():
            continue  # nothing left, or only the trailing number ("About 300")
        start = base if i == 0 else base + _word_offset(g, words, i)
        end = base + len(g) if j == len(words) else \
            base + _word_offset(g, words, j - 1) + len(words[j - 1])
        while end > start and sentence[end - 1] in ".,":
            end -= 1
        text = sentence[start:end]
        if len(text) < 2 and not text.isupper():
            continue
        out.append(Span(text, start, end))
    return out


def _word_offset(g: str, words: list[str], i: int) -> int:
    """Where ``words[i]`` starts in ``g`` (``words == g.split()``)."""
    pos = 0
    for w in words[:i]:
        pos = g.index(w, pos) + len(w)
    return g.index(words[i], pos)  # (only whitespace between ``pos`` and the word)
