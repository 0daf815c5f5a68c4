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

The explanation, label and ``details`` name the *rules* that fired — a block rule
by its position only (``block[0]``: a literal entry is the very text it stops, and
a pattern may spell it out), a missing requirement as written — never the matched
text: they reach the client (``{reasons}`` in action
templates), traces, logs and the audit record, and a block rule exists precisely
because what it matches must not travel. The matched text stays in the
:class:`Evidence` spans (``text``), which the pipeline does not export, and the
layer reports no ``failed_claims`` (regenerate feedback then names the rules).
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from gateway.layers.base import Evidence, LayerConfig, LayerResources, LayerResult, VerifyInput

__all__ = ["KeywordConfig", "KeywordLayer", "compile_entry", "describe_entry"]


def compile_entry(entry: str, case_sensitive: bool) -> re.Pattern[str]:
    """Compile one ``block``/``require`` entry: ``/regex/`` or a literal on word boundaries."""
    flags = 0 if case_sensitive else re.IGNORECASE
    if len(entry) >= 2 and entry.startswith("/") and entry.endswith("/"):
        return re.compile(entry[1:-1], flags)
    words = r"\s+".join(re.escape(w) for w in entry.split())
    return re.compile(rf"(?<!\w){words}(?!\w)", flags)


def describe_entry(kind: str, index: int, entry: str) -> str:
    """``block[0]`` (by position only: a literal block entry *is* the text it stops,
    and a pattern may spell it out) or ``require[1] "phrase"`` (what is missing)."""
    if kind == "block":
        return f"{kind}[{index}]"
    if len(entry) >= 2 and entry.startswith("/") and entry.endswith("/"):
        return f"{kind}[{index}] {entry}"
    return f'{kind}[{index}] "{entry}"'


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
        if not self._block and not self._require:
            return LayerResult(score=0.5, passed=True, skipped=True,
                               explanation="no block or require entries configured")
        text = inp.response_text
        evidence: list[Evidence] = []
        blocked: list[str] = []
        counts: list[int] = []
        missing: list[str] = []
        for i, (entry, pattern) in enumerate(self._block):
            hits = [m.group(0) for m in pattern.finditer(text)]
            if hits:
                rule = describe_entry("block", i, entry)
                blocked.append(rule)
                counts.append(len(hits))
                # the matched text lives only here: Evidence is not exported
                evidence.extend(Evidence(text=hit, status="blocked", reason=f"matched {rule}")
                                for hit in hits)
        for i, (entry, pattern) in enumerate(self._require):
            if not pattern.search(text):
                rule = describe_entry("require", i, entry)
                missing.append(rule)
                evidence.append(Evidence(text=entry, status="missing", reason=f"{rule} not found"))
        passed = not blocked and not missing
        parts = []
        if blocked:
            parts.append("blocked by " + ", ".join(
                f"{rule} ({n} match{'es' if n > 1 else ''})"
                for rule, n in zip(blocked, counts, strict=True)))
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        return LayerResult(
            score=1.0 if passed else 0.0,
            passed=passed,
            label="ok" if passed else ("blocked" if blocked else "missing"),
            explanation="; ".join(parts) or "no blocked entries; all required entries present",
            evidence=evidence,
            details={"blocked": blocked, "matches": counts, "missing": missing},
        )
