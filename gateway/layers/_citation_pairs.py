"""Claim–citation pair extraction for the ``citations`` layer (pure, model-free).

See :mod:`gateway.layers.citations` for the citation forms recognised. Split out
of the layer module to keep each under ~400 lines; nothing here knows about
source texts, contexts or scoring (:func:`doc_keys` reads documents' names only).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.context import Document
from gateway.layers.claims import _PLACES
from gateway.textutil import STOPWORDS, content_words, split_sentences, tokenize

__all__ = ["Pair", "author_year_keys", "candidates", "checkable", "doc_keys", "extract_pairs",
           "has_author_year_sources", "norm"]

_MIN_SEGMENT_WORDS = 3
MAX_CLAIM_CHARS = 1000
"""Longest claim text taken before a citation marker."""

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
_FOOTDEF = re.compile(r"^[ \t]*\[\^([^\]\s]+)\]:[ \t]*(.*)$", re.MULTILINE)
_SOURCES_HEAD = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?(?:sources?|references?|citations?|bibliography|"
    r"works cited)(?:\*\*|__)?[ \t]*(?::(?:\*\*|__)?[ \t]*(?P<inline>[^\n]*))?[ \t]*$",
    re.IGNORECASE | re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*•+]|(?P<n>\d+)[.)]|\[(?P<b>\d+)\])[ \t]+(?P<text>\S.*)$")
_MARKER = re.compile(
    r"\[\^(?P<fn>[^\]\s]+)\]"
    r"|(?<!!)\[(?P<br>[^\[\]\n]{1,120})\](?!\()"
    r"|\((?P<ps>(?:sources?|refs?|references?)\s*:[^()\n]{1,120})\)", re.IGNORECASE)
_NUMERIC = re.compile(r"^\s*\d+(?:\s*[-–,;]\s*\d+)*\s*$")
_LABELLED = re.compile(r"^\s*(?:sources?|refs?|references?|cite|citations?)\s*:\s*(.+)$", re.I)
_NAME_NUM = re.compile(r"[A-Z][\w'’.-]*(?:\s+[A-Za-z][\w'’.-]*){0,4}\s+\d+(?:[.:,]\d+)*")
_NOT_SOURCE_WORDS = frozenset({
    "step", "steps", "figure", "fig", "table", "tab", "chapter", "section", "sec", "part",
    "item", "option", "phase", "appendix", "note", "page", "line", "example", "exhibit",
    "equation", "eq", "level", "version", "stage", "task", "question", "round", "day", "week",
    "rule", "point", "case", "slide"})
"""First words of a ``[Word N]`` bracket that number parts of the answer, not sources."""
_MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOUNDARY = re.compile(r"[.!?](?<!\bet al\.)(?:[\"'”’)\]]|\[\^?[^\[\]\n]{1,120}\])*\s+|\n\s*")
_NORM = re.compile(r"[\s_\-:/]+")


_Mark = tuple[int, int, str, list[tuple[str, bool]], str]


@dataclass(frozen=True, slots=True)
class Pair:
    """One claim and one citation marker (or Sources-list entry) it carries."""

    claim: str
    citation: str
    """The marker or reference as written, e.g. ``[1]`` or ``Sundara 54.30``."""
    ref: str
    """What to resolve: a source name/id, or ``#n`` for the n-th numbered source."""
    explicit: bool = True
    """False for ``[word]`` brackets, which count only if they name a known source, and
    for author–year citations in parentheses (the layer decides: ``unresolved_author_year``)."""
    author_year: bool = False
    """``(Smith, 2020)`` / ``Smith (2020)`` (brackets ``[Smith, 2020]`` are plain markers)."""


def norm(ref: str) -> str:
    return _NORM.sub("-", ref.strip().strip("\"'“”‘’<>*_").rstrip(".,;").lower()).strip("-")


def doc_keys(docs: Sequence[Document]) -> dict[str, int]:
    """Each request document's id / ``title`` / ``name`` / ``source`` attribute, as
    written and :func:`norm`-alized -> its position (the first document wins); then
    its author–year keys (:func:`author_year_keys`: id and author/year attributes
    before title and first line, so ``smith2020`` beats a text merely naming Smith)."""
    out: dict[str, int] = {}
    for i, d in enumerate(docs):
        for key in (d.id, d.attrs.get("title"), d.attrs.get("name"), d.attrs.get("source")):
            if key:
                out.setdefault(key, i)
                out.setdefault(norm(key), i)
    weak: list[tuple[str, int]] = []
    for i, d in enumerate(docs):
        strong, w = author_year_keys(d.id, d.attrs, d.attrs.get("title"), d.text)
        for key in strong:
            out.setdefault(key, i)
        weak += [(k, i) for k in w]
    for key, i in weak:
        out.setdefault(key, i)
    return out


def _blank(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def _refs(m: re.Match[str], footnotes: Mapping[str, str],
          numbered: Mapping[int, str]) -> list[tuple[str, bool]]:
    """``(ref, explicit)`` for one marker: footnotes and numbers map through their lists."""
    if m.group("fn") is not None:  # no definition: the marker itself, which resolves nowhere
        return [(footnotes.get(m.group("fn")) or m.group(0), True)]
    inner = m.group("br") if m.group("br") is not None else m.group("ps")
    if _NUMERIC.match(inner):
        out: list[tuple[str, bool]] = []
        for part in re.split(r"\s*[,;]\s*", inner.strip()):
            a, _, b = re.sub(r"\s*[-–]\s*", "-", part).partition("-")
            lo, hi = int(a), int(b or a)
            out += [(numbered.get(n, f"#{n}"), True) for n in range(lo, min(hi, lo + 50) + 1)]
        return out
    labelled = _LABELLED.match(inner)
    if labelled:
        return [(r.strip(), True) for r in re.split(r"\s*;\s*", labelled.group(1)) if r.strip()]
    if "(" not in inner:
        items = [_AY_ITEM.fullmatch(i) for i in re.split(r"\s*;\s*", inner.strip())]
        if len(items) > 1 or (items[0] and "," in items[0].group(0)):  # else as below
            ay = [r for a in items if a for r in _ay_refs(a, a.group("years"))[0]]
            if ay and all(items):
                return [(r, True) for r in ay]
    if _NAME_NUM.fullmatch(inner.strip()):
        ref = inner.strip()  # "[Step 2]" is a step, not "[Smith 2020]": only if it names one
        return [(ref, ref.split(None, 1)[0].rstrip(".").lower() not in _NOT_SOURCE_WORDS)]
    return [(inner.strip(), False)]


def checkable(sentence: str) -> bool:
    """A sentence worth a citation: three content words, or a number and one."""
    n = len(content_words(tokenize(sentence)))
    return n >= _MIN_SEGMENT_WORDS or (n >= 1 and any(ch.isdigit() for ch in sentence))


def _sources_list(text: str) -> tuple[int, list[tuple[int, str]]]:
    """Start offset of a trailing Sources section (or ``len(text)``) and its numbered items."""
    heads = list(_SOURCES_HEAD.finditer(text))
    if not heads:
        return len(text), []
    head = heads[-1]
    items: list[str] = []
    numbers: list[int | None] = []
    inline = (head.group("inline") or "").strip()
    if inline:
        items += [p for p in re.split(r"\s*;\s*", inline) if p]
        numbers += [None] * (len(items))
    for line in text[head.end():].splitlines():
        if not line.strip():
            continue
        m = _LIST_ITEM.match(line)
        if m is None:
            if items:
                break
            return len(text), []
        n = m.group("n") or m.group("b")
        items.append(m.group("text").strip())
        numbers.append(int(n) if n else None)
    numbered = zip(numbers, items, strict=True)
    return head.start(), [(n or i, t) for i, (n, t) in enumerate(numbered, 1)]


def extract_pairs(answer: str, sources_list_covers_answer: bool = True) -> list[Pair]:
    """Claim–citation pairs in ``answer`` (see the module docstring for the forms)."""
    body = _CODE.sub(_blank, answer)
    footnotes = {m.group(1): m.group(2).strip() for m in _FOOTDEF.finditer(body)}
    body = _FOOTDEF.sub(_blank, body)
    cut, listed = _sources_list(body)
    body = body[:cut]
    bounds = [m.end() for m in _BOUNDARY.finditer(body)]
    numbered = dict(listed)
    # (start, end, citation as written, [(ref, explicit)], kind): "marker" | "paren" | "narrative"
    marks = [(m.start(), m.end(), m.group(0), _refs(m, footnotes, numbered), "marker")
             for m in _MARKER.finditer(body)]
    ay = _ay_marks(body) if "(" in body else []
    text = body  # claims are cut from this: author–year citations blanked out
    if ay:
        marks = _without_overlaps(marks + [
            (a, b, body[a:b], [(r, False) for r in refs], "narrative" if narr else "paren")
            for a, b, refs, narr in ay])
        parts, last = [], 0
        for a, b, *_ in marks:
            parts += [body[last:a], " " * (b - a)]
            last = b
        text = "".join(parts) + body[last:]
    pairs: list[Pair] = []
    claim, prev_end = "", -1
    for i, (m_start, m_end, written, refs, kind) in enumerate(marks):
        if kind == "narrative":
            stop = marks[i + 1][0] if i + 1 < len(marks) else len(body)
            said = _narrative_claim(text, bounds, m_start, m_end, stop)
            if checkable(said):  # "Smith (2020) agrees." states nothing to check
                pairs += [Pair(said, written, ref, False, True) for ref, _ in refs]
            continue
        if prev_end < 0 or body[prev_end:m_start].strip(" \t,;") != "":
            end = m_start
            while end > 0 and body[end - 1].isspace():  # rstrip without copying the prefix
                end -= 1
            sent = _sentence_start(bounds, end)
            # A claim is at most MAX_CLAIM_CHARS back from its marker: one endless
            # "sentence" with thousands of markers must not cost O(n²) on the event loop.
            sent = max(sent, end - MAX_CLAIM_CHARS)
            start = max(sent, prev_end)
            if start > sent and not checkable(text[start:end]):
                start = sent
            claim = _clean(text[start:end])
        prev_end = m_end
        if not claim:
            continue
        pairs += [Pair(claim, written, ref, explicit, kind == "paren") for ref, explicit in refs]
    if sources_list_covers_answer and listed and not any(p.explicit or p.author_year
                                                         for p in pairs):
        pairs = []
        for span in split_sentences(body):
            sentence = " ".join(_MARKER.sub(" ", span.text).split())
            if checkable(sentence):
                pairs += [Pair(sentence, f"Sources: {entry}", entry) for _, entry in listed]
    return pairs


def _clean(claim: str) -> str:
    return " ".join(_MARKER.sub(" ", _MD_LINK.sub(r"\1", claim)).split()).strip(" ,;:-")


def _sentence_start(bounds: list[int], end: int) -> int:
    return bounds[bisect_right(bounds, end - 1) - 1] if bounds and bounds[0] <= end - 1 else 0


def _without_overlaps(marks: list[_Mark]) -> list[_Mark]:
    out: list[_Mark] = []
    for mark in sorted(marks, key=lambda m: m[0]):
        if not out or mark[0] >= out[-1][1]:
            out.append(mark)
    return out


def _narrative_claim(text: str, bounds: list[int], start: int, end: int, stop: int) -> str:
    """What "Smith et al. (2020) found that X." claims: the rest of its sentence ("X"),
    or, when that is too short ("…, as Smith (2020) showed."), the sentence around it."""
    k = bisect_right(bounds, end)
    stop = min(stop, bounds[k] if k < len(bounds) else len(text), end + MAX_CLAIM_CHARS)
    verb = _REPORTING.match(text, end, stop)
    after = _clean(text[verb.end() if verb else end:stop])
    if checkable(after):
        return after
    sent = max(_sentence_start(bounds, start), start - MAX_CLAIM_CHARS)
    before = _ACCORDING.sub("", text[sent:start])
    return _clean(f"{before} {after}" if any(c.isalnum() for c in after) else before)


def candidates(ref: str) -> list[str]:
    """Ways a written reference may name a source: as is, link title/url, leading part."""
    ref = ref.strip()
    out = [ref]
    link = _MD_LINK.search(ref)
    if link:
        out += [link.group(1), link.group(2)]
    nn = _NAME_NUM.search(ref)
    if nn:
        out.append(nn.group(0))
    if ref[-1:].isalnum() and _AY_HAS_YEAR.search(ref):
        out += _ay_candidates(ref)
    for sep in (" — ", " – ", " - ", ": ", ", ", " ("):
        if sep in ref:
            out.append(ref.split(sep, 1)[0])
    out.append(ref.split()[0] if ref.split() else ref)
    return list(dict.fromkeys(c.strip() for c in out if c.strip()))


# -- author–year citations ---------------------------------------------------------------
#
# "(Smith, 2020)", "(Smith et al., 2020a, p. 4)", "(see Smith & Jones 2020; Lee, 2019)",
# narrative "Smith and Jones (2020) found …", and "[Smith et al., 2020]" in brackets.
# Every candidate starts at a "(" (a literal prefix: the scanner jumps between them), so
# an answer without parentheses costs one ``in`` test. Each becomes a ref written
# "Authors, 2020" that :func:`candidates` expands into id forms (``smith2020``,
# ``smith-et-al-2020``…) and an author–year key (:func:`ay_key`) that
# :func:`doc_keys` / :func:`author_year_keys` give to documents naming that author and
# year in their id, ``author``/``year`` attributes, title or first line.

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
_AY_ID = re.compile(rf"([^\W\d_][^\W\d_'’]*)(?:[-_. ]*(?:et[-_. ]*al|and|&|[^\W\d_]+))*?[-_. ]*"
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
    if not (m.group("etal") or second) and len(first) == 1 and first[0].casefold() in _PLACES:
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
