"""Find ``<tag attr="v">…</tag>`` context blocks inside message text (the ``blocks``
source of a policy's ``context``)."""

from __future__ import annotations

import re

__all__ = ["find_blocks", "strip_blocks"]

_ATTR = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


def _pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    # ``re`` keeps the compiled patterns (its own bounded cache): a policy's few tags
    # compile once.
    alt = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<({alt})(\s[^>]*)?>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)


def find_blocks(text: str, tags: tuple[str, ...]) -> list[tuple[str, dict[str, str], str]]:
    """Return ``(tag, attrs, body)`` for every block; body stripped."""
    if not tags or "<" not in text:
        return []
    out = []
    for m in _pattern(tags).finditer(text):
        attrs = {a.group(1).lower(): a.group(2) or a.group(3) or a.group(4) or ""
                 for a in _ATTR.finditer(m.group(2) or "")}
        out.append((m.group(1).lower(), attrs, m.group(3).strip()))
    return out


def strip_blocks(text: str, tags: tuple[str, ...]) -> str:
    return _pattern(tags).sub("", text) if tags else text
