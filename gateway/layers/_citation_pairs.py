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
from gateway.textutil import content_words, split_sentences, tokenize

__all__ = ["Pair", "candidates", "checkable", "doc_keys", "extract_pairs", "norm"]

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
_BOUNDARY = re.compile(r"[.!?](?:[\"'”’)\]]|\[\^?[^\[\]\n]{1,120}\])*\s+|\n\s*")
_NORM = re.compile(r"[\s_\-:/]+")


@dataclass(frozen=True, slots=True)
class Pair:
    """One claim and one citation marker (or Sources-list entry) it carries."""

    claim: str
    citation: str
    """The marker or reference as written, e.g. ``[1]`` or ``Sundara 54.30``."""
    ref: str
    """What to resolve: a source name/id, or ``#n`` for the n-th numbered source."""
    explicit: bool = True
    """False for ``[word]`` brackets, which count only if they name a known source."""


def norm(ref: str) -> str:
    return _NORM.sub("-", ref.strip().strip("\"'“”‘’<>*_").rstrip(".,;").lower()).strip("-")


def doc_keys(docs: Sequence[Document]) -> dict[str, int]:
    """Each request document's id / ``title`` / ``name`` / ``source`` attribute, as
    written and :func:`norm`-alized -> its position (the first document wins)."""
    out: dict[str, int] = {}
    for i, d in enumerate(docs):
        for key in (d.id, d.attrs.get("title"), d.attrs.get("name"), d.attrs.get("source")):
            if key:
                out.setdefault(key, i)
                out.setdefault(norm(key), i)
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
    pairs: list[Pair] = []
    claim, prev_end = "", -1
    for m in _MARKER.finditer(body):
        refs = _refs(m, footnotes, dict(listed))
        if prev_end < 0 or body[prev_end:m.start()].strip(" \t,;") != "":
            end = m.start()
            while end > 0 and body[end - 1].isspace():  # rstrip without copying the prefix
                end -= 1
            sent = bounds[bisect_right(bounds, end - 1) - 1] if bounds and bounds[0] <= end - 1 \
                else 0
            # A claim is at most MAX_CLAIM_CHARS back from its marker: one endless
            # "sentence" with thousands of markers must not cost O(n²) on the event loop.
            sent = max(sent, end - MAX_CLAIM_CHARS)
            start = max(sent, prev_end)
            if start > sent and not checkable(body[start:end]):
                start = sent
            claim = " ".join(_MARKER.sub(" ", _MD_LINK.sub(r"\1", body[start:end])).split())
            claim = claim.strip(" ,;:-")
        prev_end = m.end()
        if not claim:
            continue
        pairs += [Pair(claim, m.group(0), ref, explicit) for ref, explicit in refs]
    if sources_list_covers_answer and listed and not any(p.explicit for p in pairs):
        pairs = []
        for span in split_sentences(body):
            text = " ".join(_MARKER.sub(" ", span.text).split())
            if checkable(text):
                pairs += [Pair(text, f"Sources: {entry}", entry) for _, entry in listed]
    return pairs


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
    for sep in (" — ", " – ", " - ", ": ", ", ", " ("):
        if sep in ref:
            out.append(ref.split(sep, 1)[0])
    out.append(ref.split()[0] if ref.split() else ref)
    return list(dict.fromkeys(c.strip() for c in out if c.strip()))
