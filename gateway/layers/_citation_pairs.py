"""Claim–citation pair extraction for the ``citations`` layer (pure, model-free).

See :mod:`gateway.layers.citations` for the citation forms recognised. Split out
of the layer module to keep each under ~400 lines (author–year citations are in
:mod:`gateway.layers._author_year`); nothing here knows about source texts,
contexts or scoring (:func:`doc_keys` / :func:`corpus_keys` read only sources' names,
titles and first lines).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gateway.layers._author_year import (
    _ACCORDING,
    _AY_HAS_YEAR,
    _AY_ITEM,
    _NOT_SOURCE_WORDS,
    _REPORTING,
    _ay_candidates,
    _ay_marks,
    _ay_refs,
    author_year_keys,
)
from gateway.sources.context import Document
from gateway.text.tokens import content_words, split_sentences, tokenize

__all__ = ["Pair", "candidates", "checkable", "corpus_keys", "doc_keys", "extract_pairs",
           "marker_spans", "norm"]

_MIN_CLAIM_WORDS = 3
"""Content words that make a sentence worth a citation (:func:`checkable`)."""
_MIN_SEGMENT_WORDS = 2
"""Content words that make the clause since an earlier marker in the same sentence its
own claim ("… opened in 1932 [a] and carries eight lanes [b]"; or one and a digit):
shorter, it joins the previous marker's claim (usually: the sentence up to it)."""
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
_MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOUNDARY = re.compile(r"[.!?](?<!\bet al\.)(?:[\"'”’)\]]|\[\^?[^\[\]\n]{1,120}\])*\s+|\n\s*")
_NORM = re.compile(r"[\s_\-:/]+")
_SPACED_PUNCT = re.compile(r" (?=[,;:.!?])")


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
    sentence: str = ""
    """When the claim is only the clause since an earlier marker of its sentence
    ("and carries eight lanes"), the sentence up to the marker, which holds its subject
    ("The bridge opened in 1932 and carries eight lanes"); else empty (the claim is it)."""


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


def corpus_keys(corpus: Mapping[str, str]) -> dict[str, str]:
    """Corpus sources' normalized id / title / url, then author–year keys (strong
    before weak) -> id (:func:`doc_keys` for a corpus)."""
    out = {norm(k): k for k in corpus}
    meta = getattr(corpus, "meta", None) or {}
    for key, m in meta.items():
        for alias in (getattr(m, "title", None), getattr(m, "url", None)):
            if alias:
                out.setdefault(norm(alias), key)
    weak: list[tuple[str, str]] = []
    for key, text in corpus.items():
        m = meta.get(key)
        strong, w = author_year_keys(key, {}, getattr(m, "title", None), text)
        for k in strong:
            out.setdefault(k, key)
        weak += [(k, key) for k in w]
    for k, key in weak:
        out.setdefault(k, key)
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


def marker_spans(text: str, known: Callable[[str], bool] | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each citation marker in ``text`` — for layers that must not
    read a marker as part of the claim (the ``1`` of ``[1]`` is no number the answer
    states). Only what is unmistakably a citation: ``[^2]``, ``[1]``, ``[1, 3-4]``,
    ``[Source: X]`` / ``(Source: X)``, ``[Sundara 54.30]`` (not ``[Step 2]``),
    ``[Smith, 2020]``, ``(Smith et al., 2020; Lee, 2019)``, ``Smith et al. (2020)`` or
    ``Smith (2020) found``, and ``[X]`` where ``known(norm(X))`` (a request document's
    id). Free text in brackets ("[in 1967]") and "written by Lennon (1967)" stay
    claims: a wrong fact must not hide behind a bracket."""
    if "[" not in text and "(" not in text:
        return []
    out = []
    for m in _MARKER.finditer(text):
        if m.group("br") is not None and not _cites(m.group("br"), known):
            continue
        out.append((m.start(), m.end()))
    if "(" in text:
        for a, b, _, narrative in _ay_marks(text):
            # A narrative citation needs "et al." or a reporting verb here: "written by
            # Lennon and McCartney (1967)" states who and when, it cites nothing.
            if not narrative or "et al" in text[a:b] or _REPORTING.match(text, b):
                out.append((a, b))
        out.sort()
    return out


def _cites(inner: str, known: Callable[[str], bool] | None) -> bool:
    """Whether the bracket text ``inner`` is a citation (:func:`marker_spans`)."""
    inner = inner.strip()
    if _NUMERIC.match(inner) or _LABELLED.match(inner):
        return True
    if _NAME_NUM.fullmatch(inner):
        return inner.split(None, 1)[0].rstrip(".").lower() not in _NOT_SOURCE_WORDS
    items = [_AY_ITEM.fullmatch(i) for i in re.split(r"\s*;\s*", inner)]
    if all(items) and (len(items) > 1 or "," in inner):
        return True
    return known is not None and known(norm(inner))


def checkable(sentence: str, min_words: int = _MIN_CLAIM_WORDS) -> bool:
    """A sentence worth a citation: three content words (``min_words``), or a number and one."""
    n = len(content_words(tokenize(sentence)))
    return n >= min_words or (n >= 1 and any(ch.isdigit() for ch in sentence))


_FEW_LINES = 64
"""Up to this many newlines, :func:`_last_head` tries the heading at each line start."""


def _last_head(text: str) -> re.Match[str] | None:
    """The last match of ``_SOURCES_HEAD.finditer(text)``. The pattern is anchored at a
    line start (``^``, multi-line) and never crosses a newline, so its matches are the
    line starts where it matches: tried from the last line back (one ``match`` per
    line, cheaper than lower-casing the text for a gate) in a text of few lines."""
    if text.count("\n") > _FEW_LINES:
        if text.isascii():  # (ASCII: the heading's words ignoring case are these substrings)
            low = text.lower()
            if not ("source" in low or "reference" in low or "citation" in low
                    or "bibliography" in low or "works cited" in low):
                return None
        heads = list(_SOURCES_HEAD.finditer(text))
        return heads[-1] if heads else None
    end = len(text)
    while True:
        start = text.rfind("\n", 0, end) + 1
        m = _SOURCES_HEAD.match(text, start)
        if m is not None or not start:
            return m
        end = start - 1


def _sources_list(text: str) -> tuple[int, list[tuple[int, str]]]:
    """Start offset of a trailing Sources section (or ``len(text)``) and its numbered items."""
    head = _last_head(text)
    if head is None:
        return len(text), []
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


def _may_mark(body: str) -> bool:
    """Whether ``_MARKER`` can match in ``body``: its alternatives open with "[" or with
    "(" and then "s" or "r" ignoring case (``(source: …)``, ``(refs: …)``), so an answer
    with parentheses but no "[" is scanned only when one of those follows a "(" (the
    scan tries the pattern at every character; tests/layers/test_citation_marker_gate.py)."""
    if "[" in body:
        return True
    return "(" in body and ("(s" in body or "(r" in body or "(S" in body or "(R" in body
                            or "(\u017f" in body)


def extract_pairs(answer: str, sources_list_covers_answer: bool = True) -> list[Pair]:
    """Claim–citation pairs in ``answer`` (see the module docstring for the forms)."""
    # Each pattern only where its literal can be: a code span's "`", a footnote's "[^".
    body = _CODE.sub(_blank, answer) if "`" in answer else answer
    footnotes: dict[str, str] = {}
    if "[^" in body:
        footnotes = {m.group(1): m.group(2).strip() for m in _FOOTDEF.finditer(body)}
        body = _FOOTDEF.sub(_blank, body)
    cut, listed = _sources_list(body)
    body = body[:cut]
    numbered = dict(listed)
    # (start, end, citation as written, [(ref, explicit)], kind): "marker" | "paren" | "narrative"
    # Every marker opens with "[" or "(" (one scan of the answer for them: the pattern,
    # its look-behind first, is tried at every character, ~1 % of a verification).
    marks = [(m.start(), m.end(), m.group(0), _refs(m, footnotes, numbered), "marker")
             for m in _MARKER.finditer(body)] if _may_mark(body) else []
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
    # Sentence ends, read by the marks only (most answers have none).
    bounds = [m.end() for m in _BOUNDARY.finditer(body)] if marks else []
    pairs: list[Pair] = []
    claim, sentence, prev_end, claim_start = "", "", -1, 0
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
            # After an earlier marker of the sentence, the claim is the clause since that
            # marker (the earlier text is the other citation's to back); a clause too short
            # to check ("… [a] and still stands [b]") joins the previous claim (from the
            # sentence start, or from the marker before: "…; it has a cycleway [b]").
            start = max(sent, prev_end)
            if start > sent and not checkable(text[start:end], _MIN_SEGMENT_WORDS):
                start = max(sent, claim_start)
            claim_start = start
            claim = _clean(text[start:end])
            sentence = _clean(text[sent:end]) if start > sent else ""
        prev_end = m_end
        if not claim:
            continue
        pairs += [Pair(claim, written, ref, explicit, kind == "paren", sentence)
                  for ref, explicit in refs]
    if sources_list_covers_answer and listed and not any(p.explicit or p.author_year
                                                         for p in pairs):
        pairs = []
        for span in split_sentences(body):
            sentence = " ".join(_MARKER.sub(" ", span.text).split())
            if checkable(sentence):
                pairs += [Pair(sentence, f"Sources: {entry}", entry) for _, entry in listed]
    return pairs


def _clean(claim: str) -> str:
    text = " ".join(_MARKER.sub(" ", _MD_LINK.sub(r"\1", claim)).split())
    return _SPACED_PUNCT.sub("", text).strip(" ,;:-")  # "1932 [a], and" -> "1932, and"


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
