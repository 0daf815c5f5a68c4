"""Author–year citations for the ``citations`` layer (pure, model-free).

"(Smith, 2020)", "(Smith et al., 2020a, p. 4)", "(see Smith & Jones 2020; Lee, 2019)",
narrative "Smith and Jones (2020) found …", and "[Smith et al., 2020]" in brackets.
Every candidate starts at a "(" (a literal prefix: the scanner jumps between them), so
an answer without parentheses costs one ``in`` test. Each becomes a ref written
"Authors, 2020" that :func:`gateway.layers._citation_pairs.candidates` expands into id
forms (``smith2020``, ``smith-et-al-2020``…) and an author–year key (:func:`ay_key`)
that :func:`gateway.layers._citation_pairs.doc_keys` / :func:`author_year_keys` give to
documents naming that author and year in their id, ``author``/``year`` attributes,
title or first line. Split out of :mod:`gateway.layers._citation_pairs` (which uses
the underscored names here) to keep each module under ~400 lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gateway.sources.context import Document
from gateway.text.tokens import PLACES, STOPWORDS

__all__ = ["author_year_keys", "ay_key", "has_author_year_sources", "parse_author_year"]

_NOT_SOURCE_WORDS = frozenset({
    "step", "steps", "figure", "fig", "table", "tab", "chapter", "section", "sec", "part",
    "item", "option", "phase", "appendix", "note", "page", "line", "example", "exhibit",
    "equation", "eq", "level", "version", "stage", "task", "question", "round", "day", "week",
    "rule", "point", "case", "slide"})
"""First words of a ``[Word N]`` bracket that number parts of the answer, not sources."""

_YEAR = r"(?:1[5-9]|20)\d\d"
_UP = "A-ZÀ-ÖØ-Þ"
_AY_WORD = rf"[{_UP}][^\W\d_]*(?:['’-][^\W\d_]+)*"
_PARTICLE = r"(?:van|von|de|der|den|da|di|du|del|della|le|la|dos|das|ter|ten|al|el|bin)"
_AY_NAME = rf"(?:{_PARTICLE}\s+)*{_AY_WORD}(?:\s+(?:(?:of|for|on|the)\s+)*{_AY_WORD}){{0,3}}"
_AY_AUTHORS = (rf"(?P<first>{_AY_NAME})(?:(?P<etal>\s+et\.?\s+al\b\.?)"
               rf"|(?:\s*,\s*{_AY_NAME})*(?:\s*,?\s+and\s+|\s*,?\s*&\s*)(?P<second>{_AY_NAME}))?")
_AY_ITEM = re.compile(
    r"(?i:(?:see(?:\s+also)?|e\.g\.,?|cf\.,?|i\.e\.,?|but\s+see|as\s+cited\s+in|also)\s+)?"
    rf"(?P<authors>{_AY_AUTHORS})(?:\s*,\s*|\s+)(?P<years>{_YEAR}[a-z]?(?:\s*,\s*{_YEAR}[a-z]?)*)"
    r"(?:\s*[,:]\s*(?:(?:pp?|ch|chap|sec|para)\.?\s*)?\d+(?:\s*[-–]\s*\d+)?)?")
_AY_SURNAME = rf"(?:{_PARTICLE}\s+)*{_AY_WORD}"
_AY_NARRATIVE = re.compile(  # one-word surnames: "Tokyo Olympics (2020)" is no citation
    rf"(?<![\w'’&-])(?P<authors>(?P<first>{_AY_SURNAME})(?:(?P<etal>\s+et\.?\s+al\b\.?)"
    rf"|(?:\s*,?\s+and\s+|\s*,?\s*&\s*)(?P<second>{_AY_SURNAME}))?)\s*$")
_AY_CUE = re.compile(r"(?i:\b(?:according\s+to|by|in|as|see|from|following|cf\.))\s+$")
"""Words before a narrative citation that make "Smith (2020)" one without "et al."."""
_AY_PAREN = re.compile(r"\((?P<inner>[^()\n]{1,300})\)")
_AY_YEARS_ONLY = re.compile(rf"\s*{_YEAR}[a-z]?(?:\s*,\s*{_YEAR}[a-z]?)*\s*")
_AY_HAS_YEAR = re.compile(rf"(?<!\d){_YEAR}(?![\d])")
# Each further name part needs its separator: with an optional one a run of letters
# splits in 2^n ways, and an id with no year ("call_kQzXbLrTwYpMnHvDsJfGcA7e")
# backtracked for seconds on the event loop.
_AY_ID = re.compile(rf"([^\W\d_][^\W\d_'’]*)(?:[-_. &]+(?:et[-_. ]*al|and|[^\W\d_]+))*?[-_. &]*"
                    rf"({_YEAR})(?!\d)")
_AY_CAP = re.compile(rf"(?<![\w'’-]){_AY_WORD}")
_NOT_AUTHORS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec spring summer autumn fall winter "
    "monday tuesday wednesday thursday friday saturday sunday christmas easter circa ca "
    "fy cy ad bc bce ce since until till before after from through around about early late "
    "mid updated revised est established founded born died published released accessed "
    "retrieved copyright edition vol volume no issue in on at by of for as and or but the "
    "a an this that these those its his her their our see also eg ie cf".split()
) | _NOT_SOURCE_WORDS
"""First words that make "(May 2020)", "(In 2019)", "(Version 2020)"… not author–year."""
_REPORTING = re.compile(
    r"[\s,;:—–-]*(?:(?:also|further|recently|have|has|had)\s+)*(?:found|find|finds|showed|show|"
    r"shows|shown|demonstrated|demonstrate|demonstrates|reported|report|reports|observed|say|"
    r"says|said|"
    r"argued|argue|argues|suggested|suggest|suggests|noted|note|notes|concluded|conclude|"
    r"estimated|estimate|estimates|proposed|claimed|stated|states|wrote|writes|explained|"
    r"described|identified|confirmed|established|revealed|indicated|indicate|indicates)\b"
    r"(?:\s+that\b)?[\s,]*", re.IGNORECASE)
_ACCORDING = re.compile(r"(?:^|,?\s*\b)(?:according\s+to|as\s+(?:\w+\s+)?(?:by|in)|as)\s*$",
                        re.IGNORECASE)


def _surname_key(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalpha())


def ay_key(surname: str, year: str) -> str:
    """Internal resolution key of an (author surname, year) pair; ``norm``-stable and
    unlike any id a user writes."""
    return f"\x00{_surname_key(surname)}\x00{year[:4]}"


def _author_words(name: str) -> tuple[list[str], int]:
    """The words of a name without leading non-names ("In Smith" -> Smith), and the
    offset of the first kept word in ``name``."""
    if " " not in name:  # the common case: one surname
        key = name.casefold()
        return ([], len(name)) if key in _NOT_AUTHORS or key in STOPWORDS else ([name], 0)
    words = [(w.group(0), w.start()) for w in re.finditer(r"\S+", name)]
    while words and (words[0][0].casefold() in _NOT_AUTHORS
                     or words[0][0].casefold() in STOPWORDS):
        words.pop(0)
    return [w for w, _ in words], words[0][1] if words else len(name)


def _ay_refs(m: re.Match[str], years: str) -> tuple[list[str], int]:
    """"Authors, year" refs of one matched item (one per year) and the offset where the
    authors start in the match, or ``[]`` if the "authors" are a month, a stopword, a
    part of the answer ("Step"), a lone place ("Paris, 1889")…"""
    first, skip = _author_words(m.group("first"))
    if not first:
        return [], 0
    second = m.group("second")
    if second and second.split()[0].casefold() in _NOT_AUTHORS:
        return [], 0
    if not (m.group("etal") or second) and len(first) == 1 and first[0].casefold() in PLACES:
        return [], 0
    at = m.start("first") + skip
    authors = " ".join(m.string[at:m.end("authors")].split())
    if "," not in years:
        return [f"{authors}, {years.strip()}"], at - m.start()
    return [f"{authors}, {y}" for y in re.split(r"\s*,\s*", years.strip())], at - m.start()


def _ay_marks(body: str) -> list[tuple[int, int, list[str], bool]]:
    """``(start, end, refs, narrative)`` of each author–year citation in ``body``."""
    out: list[tuple[int, int, list[str], bool]] = []
    for m in _AY_PAREN.finditer(body):
        inner = m.group("inner")
        if not _AY_HAS_YEAR.search(inner):
            continue
        if _AY_YEARS_ONLY.fullmatch(inner):  # narrative: "Smith et al. (2020) found…"
            lo = max(0, m.start() - 80)  # two authors with particles fit
            n = _AY_NARRATIVE.search(body, lo, m.start())
            refs, skip = _ay_refs(n, inner) if n else ([], 0)
            # Without "et al.", "Smith (2020)" must report something ("… found", "…
            # showed") or follow a cue ("according to", "by", "in"): else "Windows (2020)".
            if n and refs and (n.group("etal") or _REPORTING.match(body, m.end())
                               or _AY_CUE.search(body, max(0, n.start() - 16), n.start())):
                out.append((n.start() + skip, m.end(), refs, True))
            continue
        refs = []
        for item in re.split(r"\s*;\s*", inner.strip()):
            a = _AY_ITEM.fullmatch(item)
            got = _ay_refs(a, a.group("years"))[0] if a else []
            if not got:
                refs = []
                break
            refs += got
        if refs:
            out.append((m.start(), m.end(), refs, False))
    return out


def parse_author_year(ref: str) -> tuple[str, str | None, str, bool] | None:
    """``(first author, second author, year, et al.)`` of a ref written "Authors, 2020"."""
    m = _AY_ITEM.fullmatch(ref.strip())
    if m is None or "," in m.group("years"):
        return None
    first = _author_words(m.group("first"))[0]
    if not first:
        return None
    return " ".join(first), m.group("second"), m.group("years"), bool(m.group("etal"))


def _ay_candidates(ref: str) -> list[str]:
    """Id forms and author–year keys an author–year ref may resolve by."""
    parsed = parse_author_year(ref)
    if parsed is None:
        return []
    first, second, year, etal = parsed
    s, last, y0 = _surname_key(first), _surname_key(first.split()[-1]), year[:4]
    out: list[str] = []
    for y in dict.fromkeys((year, y0)):
        out += [f"{s}{y}", f"{s}-{y}"]
        if etal:
            out += [f"{s}etal{y}", f"{s}-et-al-{y}"]
        if second:
            s2 = _surname_key(second)
            out += [f"{s}{s2}{y}", f"{s}-{s2}-{y}", f"{s}-and-{s2}-{y}"]
    return out + [ay_key(s, y0), ay_key(last, y0)]


def _head_keys(text: str | None) -> list[str]:
    """Weak author–year keys of a title or first line: each capitalised word × each year."""
    if not text:
        return []
    head = text[:240].split("\n", 1)[0]
    years = dict.fromkeys(y.group(0) for y in _AY_HAS_YEAR.finditer(head))
    if not years:
        return []
    words = [w.group(0) for w in _AY_CAP.finditer(head)]
    return [ay_key(w, y) for w in words if w.casefold() not in _NOT_AUTHORS
            and w.casefold() not in STOPWORDS for y in years]


def _strong_keys(sid: str | None, attrs: Mapping[str, str]) -> list[str]:
    """Author–year keys from an id (``smith2020``, ``Smith-et-al-2020b``) and from
    ``author``/``authors`` + ``year``/``date``/``published`` attributes."""
    out: list[str] = []
    m = _AY_ID.match(sid[:80]) if sid else None
    if m and m.group(1).casefold() not in _NOT_AUTHORS:
        out.append(ay_key(m.group(1), m.group(2)))
    who = attrs.get("author") or attrs.get("authors") or attrs.get("creator")
    when = " ".join(attrs.get(k) or "" for k in ("year", "date", "published"))
    years = _AY_HAS_YEAR.findall(when) if who else []
    if who and years:
        out += [ay_key(w.group(0), years[0]) for w in _AY_CAP.finditer(who)
                if w.group(0).casefold() not in _NOT_AUTHORS]
    return out


def author_year_keys(sid: str | None, attrs: Mapping[str, str], title: str | None,
                     text: str) -> tuple[list[str], list[str]]:
    """``(strong, weak)`` author–year keys of one source: strong from its id and
    author/year attributes, weak from its title and its text's first line."""
    return _strong_keys(sid, attrs), _head_keys(title) + _head_keys(text)


def has_author_year_sources(docs: Sequence[Document]) -> bool:
    """Does some request document carry an author–year identity (id or attributes)?"""
    return any(_strong_keys(d.id, d.attrs) for d in docs)
