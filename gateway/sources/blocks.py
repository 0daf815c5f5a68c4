"""Find ``<tag attr="v">…</tag>`` context blocks inside message text (the ``blocks``
source of a policy's ``context``).

A block is what ``<(tag)(\\s[^>]*)?>(.*?)</\\1\\s*>`` (case-insensitive, ``.`` matching
newlines) matches, scanning left to right as ``re.finditer`` does. That one pattern
tries the closing tag at every character of a body (≈ 0.3 ms for a 700-word block, twice
per request with :func:`strip_blocks`); here an opening tag is found with one pattern
and its closing tag with another, searched from there, and a tag with no closing tag
left is never searched for again (linear in the text, also for a text full of
unclosed openers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["find_blocks", "split_blocks", "split_blocks_kept", "strip_blocks"]

_ATTR = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


@lru_cache(maxsize=64)
def _opener(tags: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<({alt})(\s[^>]*)?>", re.DOTALL | re.IGNORECASE)


@lru_cache(maxsize=64)
def _closer(tag: str) -> re.Pattern[str]:
    """Closing tags of ``tag`` in any case: every closing tag of a block opened by
    ``tag``, and maybe more (``_same`` says which)."""
    return re.compile(rf"</({re.escape(tag)})\s*>", re.IGNORECASE)


@lru_cache(maxsize=64)
def _same_pattern(n: int) -> re.Pattern[str]:
    return re.compile(rf"(.{{{n}}})\1", re.DOTALL | re.IGNORECASE)


def _same(opened: str, closed: str) -> bool:
    """Whether ``closed`` matches ``opened`` as the backreference ``\\1`` would (``re``'s
    case-insensitive comparison of a group, narrower than a case-insensitive literal)."""
    if closed == opened:  # a group always matches its own text
        return True
    return _same_pattern(len(opened)).fullmatch(opened + closed) is not None


def _blocks(text: str, tags: tuple[str, ...]) -> Iterator[tuple[re.Match[str], re.Match[str]]]:
    """(opening tag, closing tag) of each block, in text order."""
    opener = _opener(tags)
    unclosed: dict[str, int] = {}  # opening tag -> a position it is never closed after
    pos = 0
    while (m := opener.search(text, pos)) is not None:
        opened = m.group(1)  # as written: \1 compares it with re's own case folding
        close = None
        if unclosed.get(opened, len(text) + 1) > m.end():
            closer, at = _closer(opened), m.end()
            while (close := closer.search(text, at)) is not None and \
                    not _same(opened, close.group(1)):
                at = close.start() + 1
            if close is None:
                unclosed[opened] = m.end()
        if close is None:
            pos = m.start() + 1
            continue
        yield m, close
        pos = close.end()


def _block(text: str, m: re.Match[str], close: re.Match[str]) -> tuple[str, dict[str, str], str]:
    attrs = {a.group(1).lower(): a.group(2) or a.group(3) or a.group(4) or ""
             for a in _ATTR.finditer(m.group(2) or "")}
    return m.group(1).lower(), attrs, text[m.end():close.start()].strip()


def find_blocks(text: str, tags: tuple[str, ...]) -> list[tuple[str, dict[str, str], str]]:
    """Return ``(tag, attrs, body)`` for every block; body stripped."""
    if not tags or "<" not in text:
        return []
    return [_block(text, m, close) for m, close in _blocks(text, tags)]


def split_blocks(text: str,
                 tags: tuple[str, ...]) -> tuple[list[tuple[str, dict[str, str], str]], str]:
    """``(find_blocks(text, tags), strip_blocks(text, tags))`` in one scan (a system
    message's blocks and the rest of it)."""
    if not tags or "<" not in text:
        return [], text
    found: list[tuple[str, dict[str, str], str]] = []
    parts: list[str] = []
    pos = 0
    for m, close in _blocks(text, tags):
        found.append(_block(text, m, close))
        parts.append(text[pos:m.start()])
        pos = close.end()
    parts.append(text[pos:])
    return found, "".join(parts)


Split = tuple[tuple[tuple[str, dict[str, str], str], ...], str]
_KEPT: dict[tuple[str, tuple[str, ...]], Split] = {}
_kept_chars = [0]
KEEP_MIN_CHARS = 1_000
"""A text shorter than this is scanned again (its scan costs about what a look-up does)."""
KEEP_MAX_CHARS = 200_000
"""Nor is a longer one kept: its look-up hashes it whole (a scan's cost, not much less)."""
KEEP_TOTAL_CHARS = 2_000_000
"""The kept texts' characters, at most (the oldest go first)."""


def split_blocks_kept(text: str, tags: tuple[str, ...]) -> Split:
    """:func:`split_blocks` of a system message, kept per text: the same context sent
    again (what the ``grounding`` layer's index cache also keeps) is not scanned again.
    Only the message's own text is the key (its blocks and the rest are all that is
    kept); the blocks' attribute dicts are shared, never to be changed by the caller."""
    if not KEEP_MIN_CHARS <= len(text) <= KEEP_MAX_CHARS or "<" not in text:
        found, rest = split_blocks(text, tags)
        return tuple(found), rest
    key = (text, tags)
    hit = _KEPT.get(key)
    if hit is not None:
        return hit
    found, rest = split_blocks(text, tags)
    hit = _KEPT[key] = (tuple(found), rest)
    _kept_chars[0] += len(text)
    while _kept_chars[0] > KEEP_TOTAL_CHARS and _KEPT:  # oldest first (insertion order)
        old = next(iter(_KEPT))
        if _KEPT.pop(old, None) is not None:
            _kept_chars[0] -= len(old[0])
    return hit


def strip_blocks(text: str, tags: tuple[str, ...]) -> str:
    """``text`` without its blocks."""
    if not tags or "<" not in text:
        return text
    parts: list[str] = []
    pos = 0
    for m, close in _blocks(text, tags):
        parts.append(text[pos:m.start()])
        pos = close.end()
    parts.append(text[pos:])
    return "".join(parts)
