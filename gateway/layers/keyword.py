"""``keyword`` layer: block words/patterns, require words/patterns.

A cheap guard for policies and tests. Each entry of ``block`` / ``require`` is
either a literal word or phrase, matched on word boundaries (``"ssn"`` does not
match ``"lesson"``), or a regular expression written between slashes
(``"/\\bAKIA[0-9A-Z]{16}\\b/"``). Patterns are compiled once, when the config is
parsed, so a broken regex is a policy-load error, not a request-time one.

Verdict: ``score`` 1.0 and ``passed`` when no ``block`` entry matches and every
``require`` entry does; otherwise ``score`` 0.0, with one :class:`Evidence` per
blocked hit or missing requirement. With no entries configured the layer is
skipped (neutral score 0.5, like the other layers that have nothing to check).
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from gateway.verify.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput

__all__ = ["KeywordConfig", "KeywordLayer", "compile_entry"]


def compile_entry(entry: str, case_sensitive: bool) -> re.Pattern[str]:
    """Compile one ``block``/``require`` entry: ``/regex/`` or a literal on word boundaries."""
    flags = 0 if case_sensitive else re.IGNORECASE
    if len(entry) >= 2 and entry.startswith("/") and entry.endswith("/"):
        return re.compile(entry[1:-1], flags)
    words = r"\s+".join(re.escape(w) for w in entry.split())
    return re.compile(rf"(?<!\w){words}(?!\w)", flags)


class KeywordConfig(LayerConfig):
    block: list[str] = Field(default_factory=list)
    """Entries that fail the answer when found."""
    require: list[str] = Field(default_factory=list)
    """Entries that must all appear in the answer."""
    case_sensitive: bool = False

    @field_validator("block", "require")
    @classmethod
    def _valid_entries(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if not entry.strip():
                raise ValueError("empty keyword entry")
            try:
                compile_entry(entry, case_sensitive=True)
            except re.error as exc:
                raise ValueError(f"invalid regex {entry!r}: {exc}") from exc
        return entries


class KeywordLayer:
    """Fail answers containing blocked entries or missing required ones."""

    name: ClassVar[str] = "keyword"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = KeywordConfig

    def __init__(self, config: KeywordConfig, resources: LayerResources | None = None) -> None:
        self.config = config
        cs = config.case_sensitive
        self._block = [(e, compile_entry(e, cs)) for e in config.block]
        self._require = [(e, compile_entry(e, cs)) for e in config.require]

    async def verify(self, inp: VerifyInput) -> LayerResult:
        text = inp.response_text
        evidence: list[Evidence] = []
        for entry, pattern in self._block:
            m = pattern.search(text)
            if m:
                evidence.append(Evidence(text=m.group(0), status="blocked",
                                         reason=f"matched block entry {entry!r}"))
        for entry, pattern in self._require:
            if not pattern.search(text):
                evidence.append(Evidence(text=entry, status="missing",
                                         reason=f"required entry {entry!r} not found"))
        if not self._block and not self._require:
            return LayerResult(score=0.5, passed=True, skipped=True,
                               explanation="no block or require entries configured")
        blocked = [e.text for e in evidence if e.status == "blocked"]
        missing = [e.text for e in evidence if e.status == "missing"]
        passed = not evidence
        parts = []
        if blocked:
            parts.append(f"blocked: {', '.join(map(repr, blocked))}")
        if missing:
            parts.append(f"missing: {', '.join(map(repr, missing))}")
        return LayerResult(
            score=1.0 if passed else 0.0,
            passed=passed,
            label="ok" if passed else ("blocked" if blocked else "missing"),
            explanation="; ".join(parts) or "no blocked entries; all required entries present",
            evidence=evidence,
            details={"blocked": blocked, "missing": missing},
        )
