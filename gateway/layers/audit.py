"""``audit`` layer: seed 002's three-phase audit with a deterministic credit score.

The judge *detects* errors; code *scores* them (seed 002: the model never grades):

1. **Decompose** — one judge call splits the answer into at most ``max_facts``
   atomic facts and ``max_chains`` reasoning chains (premises → conclusion), each
   string bounded where the judge's grammar allows (``ITEM_CHARS``). A reply cut at
   ``max_tokens`` keeps its complete items (``details["judge_salvaged"]``); with
   none, one repair call asks for fewer, shorter items.
2. **Fact check** and 3. **logic check** — two judge calls, run concurrently
   (optionally on another model, ``verify_model``: the seed's run/verify
   profiles). Each returns an error list; every error has a *level*
   (``contradiction`` | ``unsupported``; a ``reasonable inference`` is not an
   error; natural variants such as ``contradicted`` or ``not supported`` are read
   as the level they name, and an unreadable level counts as ``unsupported``,
   the weakest error level, noted in ``details["level_notes"]``, rather than
   voiding the audit) and a *severity* (``high`` | ``low``) per the seed's tables, spelled out
   in :data:`FACT_CHECK_PROMPT` and :data:`LOGIC_CHECK_PROMPT`
   (:mod:`gateway.layers._audit_prompts`, re-exported here). At most
   ``max_errors_per_phase`` errors per phase are kept, most severe first.
4. **Score** — deterministic: severities are first *raised* (never lowered) by
   fixed rules, the seed's "known issues" mitigations:

   - a fact error of kind ``opposite_direction`` or ``fabricated_number`` is high;
   - a numeric fact error whose relative deviation
     ``|answer_value − context_value| / |context_value|`` exceeds
     ``numeric_deviation_threshold`` is high (the seed's Low needs a deviation
     within the threshold);
   - an ``unsupported`` fact that states a number or date the context does not
     (checked model-free with the context index) is high — "fabricated specific
     numbers must be High";
   - a logic error of kind ``reversed_causality`` or ``sycophancy`` is high;

   then ``credit = credit_score(high, low)`` (:mod:`gateway.scoring.credit`),
   ``score = (credit − 1) / 4``, ``passed`` = zone GOOD, and
   ``LayerResult.credit_score`` carries the 1–5 value to the policy's
   ``decision.zones``.

The grounding context is the seed's ``context_input``; without one the layer is
skipped (nothing to audit against). Judge calls per request: 3 (1 when the
decomposition is empty, 2 when only one of facts / chains is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from pydantic import Field

from gateway.layers._audit_prompts import (
    DECOMPOSE_PROMPT,
    FACT_CHECK_PROMPT,
    FACT_KINDS,
    LOGIC_CHECK_PROMPT,
    LOGIC_KINDS,
    MARK_DECOMPOSE,
    MARK_FACTS,
    MARK_LOGIC,
    check_schema,
    decompose_schema,
)
from gateway.layers._judged import JudgeTally, excerpt, require_judge, settle
from gateway.layers.base import (
    Evidence,
    JudgeError,
    LayerConfig,
    LayerResources,
    LayerResult,
    VerifyInput,
)
from gateway.redact import shape
from gateway.scoring.credit import credit_score, zone
from gateway.text.index import context_index
from gateway.text.quantities import extract_quantities

__all__ = [
    "DECOMPOSE_PROMPT",
    "FACT_CHECK_PROMPT",
    "LOGIC_CHECK_PROMPT",
    "AuditConfig",
    "AuditError",
    "AuditLayer",
]

Level = Literal["contradiction", "unsupported"]
Severity = Literal["high", "low"]

NEUTRAL_SCORE = 0.5

_HIGH_FACT_KINDS = frozenset({"opposite_direction", "fabricated_number"})
_HIGH_LOGIC_KINDS = frozenset({"reversed_causality", "sycophancy"})
_KNOWN_KINDS = frozenset(FACT_KINDS + LOGIC_KINDS)
"""The kinds the fact- and logic-check prompts offer (gateway/layers/_audit_prompts.py)."""
_NOT_ERRORS = frozenset({"reasonable_inference", "inference", "none", "ok", "supported",
                         "no_error", "correct", "reasonable", "reasonably_inferred",
                         "inferred", "not_an_error", "no_issue"})
_LEVEL_VARIANTS: Mapping[str, Level] = {
    **dict.fromkeys(("contradiction", "contradictions", "contradicted", "contradicts",
                     "contradict", "contradicting", "contradictory", "contradicted_by_context",
                     "conflict", "conflicts", "conflicting", "conflicts_with_context",
                     "refuted"), "contradiction"),
    **dict.fromkeys(("unsupported", "not_supported", "unverified", "not_verified",
                     "unverifiable", "unsubstantiated", "no_support", "lacks_support",
                     "not_in_context", "not_mentioned", "unsupported_claim"), "unsupported"),
}
"""Judges' natural spellings of the two error levels (after :func:`_norm`)."""
_FALLBACK_LEVEL: Level = "unsupported"
"""An error with a level we cannot read counts as the weakest error level."""


class AuditConfig(LayerConfig):
    """Typed config of the ``audit`` layer (unknown keys are errors)."""

    max_facts: int = Field(5, ge=1, le=20)
    """Phase 1 keeps at most this many atomic facts (seed 002: 5)."""
    max_chains: int = Field(5, ge=0, le=20)
    """Phase 1 keeps at most this many reasoning chains."""
    max_errors_per_phase: int = Field(3, ge=1, le=20)
    """Errors kept per check phase, most severe first (seed 002 strategy default: 3)."""
    numeric_deviation_threshold: float = Field(0.10, ge=0.0, le=10.0)
    """Relative numeric deviation above which a fact error is high (seed 002: 10%)."""
    verify_model: str | None = None
    """Judge model for phases 2 and 3 (seed 002 ``verify`` profile); it wins over a
    configured ``judge.model``. Unset: phases 2–3 use the same model as phase 1
    (``judge.model``, else the request's model)."""
    max_context_chars: int = Field(24_000, ge=1_000)
    """The context sent to phases 2 and 3 is cut to this many characters: to the
    sentences sharing most words with the answer and its facts. A 2k-token judge
    needs about 4,000 (docs/layers.md, "Judges with a small context")."""
    max_tokens: int = Field(1024, ge=64, le=16_384)
    """Per judge call."""


@dataclass(frozen=True, slots=True)
class Item:
    """A fact (``F…``) or reasoning chain (``R…``) from phase 1."""

    id: str
    text: str
    premises: tuple[str, ...] = ()


@dataclass(slots=True)
class AuditError:
    """One error found by phase 2 (``phase == "fact"``) or 3 (``"logic"``)."""

    phase: Literal["fact", "logic"]
    item: str
    """The fact or chain id it is about."""
    level: Level
    severity: Severity
    kind: str = "other"
    explanation: str = ""
    answer_value: float | None = None
    context_value: float | None = None
    judged: Severity = "low"
    """The severity the judge gave, before the deterministic rules."""
    raised_by: str | None = None
    """The rule that raised the severity to high, if any."""
    judged_level: str | None = None
    """The judge's level when it was unreadable (then ``level`` is the fallback)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase, "item": self.item, "level": self.level,
                               "severity": self.severity, "kind": self.kind,
                               "explanation": self.explanation}
        if self.answer_value is not None or self.context_value is not None:
            out["answer_value"], out["context_value"] = self.answer_value, self.context_value
        if self.raised_by is not None:
            out["judged_severity"], out["raised_by"] = self.judged, self.raised_by
        if self.judged_level is not None:
            out["judged_level"] = self.judged_level
        return out


def _norm(value: Any) -> str:
    return "_".join(str(value or "").strip().lower().replace("-", " ").split())


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().rstrip("%").replace(",", ""))
        except ValueError:
            return None
    return None


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, str | int | float) else ""


def parse_decomposition(data: Any, max_facts: int,
                        max_chains: int) -> tuple[list[Item], list[Item]]:
    """Phase 1's reply -> (facts ``F1…``, chains ``R1…``), renumbered and capped."""
    raw_facts = data.get("facts", []) if isinstance(data, Mapping) else None
    raw_chains = data.get("reasoning", []) if isinstance(data, Mapping) else None
    if not isinstance(raw_facts, list) or not isinstance(raw_chains, list) \
            or not ({"facts", "reasoning"} & set(data)):
        raise JudgeError('decomposition reply is not {"facts": [...], "reasoning": [...]}')
    facts: list[Item] = []
    for raw in raw_facts:
        text = _text(raw.get("text") if isinstance(raw, Mapping) else raw)
        if text and len(facts) < max_facts:
            facts.append(Item(f"F{len(facts) + 1}", text))
    chains: list[Item] = []
    for raw in raw_chains:
        if isinstance(raw, Mapping):
            conclusion = _text(raw.get("conclusion") or raw.get("text"))
            prem = raw.get("premises")
            premises = tuple(p for p in (_text(x) for x in prem) if p) \
                if isinstance(prem, list) else ((_text(prem),) if _text(prem) else ())
        else:
            conclusion, premises = _text(raw), ()
        if conclusion and len(chains) < max_chains:
            chains.append(Item(f"R{len(chains) + 1}", conclusion, premises))
    return facts, chains


def _some(split: tuple[list[Item], list[Item]]) -> tuple[list[Item], list[Item]]:
    """A salvaged decomposition, if it kept a fact or a chain (an empty one would pass
    the answer unchecked)."""
    if not (split[0] or split[1]):
        raise JudgeError("decomposition cut at max_tokens before its first item ended")
    return split


def parse_errors(data: Any, phase: Literal["fact", "logic"], cap: int) -> list[AuditError]:
    """A check phase's reply -> its errors (reasonable inferences dropped), high first."""
    errors = data.get("errors") if isinstance(data, Mapping) else data
    if not isinstance(errors, list):
        raise JudgeError(f"{phase} check reply is not {{\"errors\": [...]}}")
    out: list[AuditError] = []
    key = "fact" if phase == "fact" else "chain"
    for raw in errors:
        if not isinstance(raw, Mapping):
            raise JudgeError(f"{phase} check reply: an error entry is not an object")
        level_text = _norm(raw.get("level"))
        if level_text in _NOT_ERRORS:
            continue
        level = _LEVEL_VARIANTS.get(level_text)
        # An unreadable level does not void the whole audit: the entry is still an
        # error report, so it counts at the weakest error level (noted in details).
        judged_level = None if level is not None else (level_text[:40] or "(missing)")
        severity = _norm(raw.get("severity"))
        if severity not in ("high", "low"):
            raise JudgeError(f"{phase} check reply: unknown severity "
                             f"({shape(raw.get('severity'))})")
        item = _text(raw.get(key) or raw.get("id") or raw.get("item"))
        if item.isdigit():  # "1" for "F1" / "R1"
            item = ("F" if phase == "fact" else "R") + item
        out.append(AuditError(
            phase=phase, item=item, level=level or _FALLBACK_LEVEL, judged_level=judged_level,
            severity=cast(Severity, severity), judged=cast(Severity, severity),
            kind=_norm(raw.get("kind")) or "other", explanation=_text(raw.get("explanation")),
            answer_value=_number(raw.get("answer_value")),
            context_value=_number(raw.get("context_value"))))
    out.sort(key=lambda e: e.severity != "high")  # stable: the judge's order within a severity
    return out[:cap]


def _raise(err: AuditError, rule: str) -> None:
    if err.severity != "high":
        err.severity, err.raised_by = "high", rule


def apply_severity_rules(errors: Sequence[AuditError], facts: Mapping[str, Item],
                         inp: VerifyInput, threshold: float) -> None:
    """Seed 002's deterministic severity constraints; they only ever raise severity."""
    index = None
    for err in errors:
        if err.severity == "high":
            continue
        if err.phase == "logic":
            if err.kind in _HIGH_LOGIC_KINDS:
                _raise(err, f"kind {err.kind} is high")
            continue
        if err.kind in _HIGH_FACT_KINDS:
            _raise(err, f"kind {err.kind} is high")
            continue
        a, c = err.answer_value, err.context_value
        if a is not None and c is not None:
            deviation = abs(a - c) / abs(c) if c else (0.0 if a == c else float("inf"))
            if deviation > threshold:
                _raise(err, f"numeric deviation {deviation:.0%} > {threshold:.0%}")
                continue
        fact = facts.get(err.item)
        if err.level == "unsupported" and fact is not None:
            if index is None:
                index = context_index(inp.context)
            dates, numbers = extract_quantities(fact.text)
            if any(not index.has_date(d) for d in dates) or \
                    any(not index.has_number(q) for q in numbers):
                _raise(err, "fabricated specific number (not in the context)")


def _numbered(items: Sequence[Item], chains: bool = False) -> str:
    lines = []
    for it in items:
        if chains:
            premises = "; ".join(it.premises) or "(none stated)"
            lines.append(f"{it.id}: premises: {premises} => conclusion: {it.text}")
        else:
            lines.append(f"{it.id}: {it.text}")
    return "\n".join(lines)


class AuditLayer:
    """Seed 002 three-phase audit (see the module docstring)."""

    name: ClassVar[str] = "audit"
    Config: ClassVar[type[LayerConfig]] = AuditConfig

    def __init__(self, config: AuditConfig, resources: LayerResources) -> None:
        self.config = config
        self.resources = resources

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        context = inp.context.text.strip()
        if not inp.response_text.strip():
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="empty",
                               explanation="empty answer: nothing to audit")
        if not context:
            return LayerResult(score=NEUTRAL_SCORE, passed=True, skipped=True, label="no_context",
                               explanation="no grounding context: nothing to audit against")
        calls = JudgeTally(require_judge(self.resources), inp.model)
        answer = inp.response_text
        question = inp.question[:2000]

        # Phase 1: decompose. It splits the answer and judges nothing, so it is sent
        # the answer and the question (a short answer is a fact only with it), not the
        # context: a long document would not fit a small judge's window for nothing.
        asked = f"QUESTION:\n{question}\n\n" if question else ""
        facts, chains = await calls.ask_json(
            DECOMPOSE_PROMPT.substitute(max_facts=cfg.max_facts, max_chains=cfg.max_chains),
            f"{MARK_DECOMPOSE}\n\n{asked}ANSWER:\n{answer}",
            max_tokens=cfg.max_tokens, schema=decompose_schema(cfg.max_facts, cfg.max_chains),
            parse=lambda data: parse_decomposition(data, cfg.max_facts, cfg.max_chains),
            # A decomposition cut at max_tokens keeps its complete items ("at most N
            # facts" is still an honest answer) unless it has none; then one repair.
            salvage=lambda data: _some(parse_decomposition(data, cfg.max_facts,
                                                           cfg.max_chains)))
        # The context, cut to the sentences sharing most words with what is checked.
        ctx, _ = excerpt(context, [answer, *(f.text for f in facts)], cfg.max_context_chars)

        # Phases 2 and 3, concurrently.
        # The seed's run/verify profiles: verify_model wins over judge.model for phases 2-3.
        verify_model = cfg.verify_model or inp.model
        threshold_pct = f"{cfg.numeric_deviation_threshold * 100:g}"

        async def fact_check() -> list[AuditError]:
            if not facts:
                return []
            errors: list[AuditError] = await calls.ask_json(
                FACT_CHECK_PROMPT.substitute(threshold_pct=threshold_pct,
                                             max_errors=cfg.max_errors_per_phase),
                f"{MARK_FACTS}\n\nCONTEXT:\n{ctx}\n\nFACTS:\n{_numbered(facts)}",
                override=cfg.verify_model, max_tokens=cfg.max_tokens,
                schema=check_schema("fact", [f.id for f in facts], cfg.max_errors_per_phase),
                parse=lambda data: parse_errors(data, "fact", cfg.max_errors_per_phase))
            return errors

        async def logic_check() -> list[AuditError]:
            if not chains:
                return []
            errors: list[AuditError] = await calls.ask_json(
                LOGIC_CHECK_PROMPT.substitute(max_errors=cfg.max_errors_per_phase),
                f"{MARK_LOGIC}\n\nCONTEXT:\n{ctx}\n\nUSER QUESTION:\n{inp.question}\n\n"
                f"ANSWER:\n{answer}\n\nREASONING:\n{_numbered(chains, chains=True)}",
                override=cfg.verify_model, max_tokens=cfg.max_tokens,
                schema=check_schema("logic", [c.id for c in chains], cfg.max_errors_per_phase),
                parse=lambda data: parse_errors(data, "logic", cfg.max_errors_per_phase))
            return errors

        # Both phases run to their end even when one fails: each call made is then
        # accounted with its reply (a cancelled call would be counted but not billed).
        fact_errors, logic_errors = await settle([fact_check(), logic_check()])

        # Phase 4: deterministic score.
        by_id = {it.id: it for it in facts}
        apply_severity_rules(fact_errors, by_id, inp, cfg.numeric_deviation_threshold)
        apply_severity_rules(logic_errors, by_id, inp, cfg.numeric_deviation_threshold)
        errors = fact_errors + logic_errors
        high = sum(e.severity == "high" for e in errors)
        low = len(errors) - high
        credit = credit_score(high, low)
        z = zone(credit)
        return self._result(facts, chains, errors, credit, z, high, low, calls, verify_model)

    def _result(self, facts: list[Item], chains: list[Item], errors: list[AuditError],
                credit: int, z: str, high: int, low: int, calls: JudgeTally,
                verify_model: str) -> LayerResult:
        items = {it.id: it for it in facts + chains}
        by_item: dict[str, list[AuditError]] = {}
        for e in errors:
            by_item.setdefault(e.item, []).append(e)
        evidence: list[Evidence] = []
        failed: list[str] = []
        for it in facts + chains:
            errs = by_item.get(it.id, [])
            if errs:
                worst = min(errs, key=lambda e: e.severity != "high")
                failed.append(it.text)
                reason = "; ".join(f"{e.severity} {e.level} ({e.kind}): {e.explanation}"
                                   + (f" [raised: {e.raised_by}]" if e.raised_by else "")
                                   for e in errs)
                evidence.append(Evidence(text=it.text, status=worst.level, reason=reason,
                                         source_id=it.id))
            else:
                evidence.append(Evidence(text=it.text, status="ok", source_id=it.id,
                                         reason="no error found"))
        for item_id, errs in by_item.items():  # errors about ids phase 1 did not give
            if item_id not in items:
                for e in errs:
                    evidence.append(Evidence(text=e.explanation or item_id, status=e.level,
                                             source_id=item_id or None,
                                             reason=f"{e.severity} {e.level} ({e.kind})"))
                    failed.append(e.explanation or item_id)
        level_notes = [f"{e.phase} {e.item or '?'}: unknown level {e.judged_level!r}, "
                       f"counted as {e.level}" for e in errors if e.judged_level is not None]
        summary = f"credit score {credit} ({z}): {high} high, {low} low severity error(s)"
        if errors:
            # Only words the layer chose: a phase-1 id (F1, R2) and a kind from the
            # prompts' lists. The judge's note, or whatever it wrote as an id or kind,
            # may quote the answer, and explanations are recorded without record_content.
            worst = min(errors, key=lambda e: e.severity != "high")
            item = worst.item if worst.item in items else "an unlisted item"
            kind = worst.kind if worst.kind in _KNOWN_KINDS else "other"
            summary += f"; e.g. {item}: {worst.severity} {kind}"
        return calls.account(LayerResult(
            score=(credit - 1) / 4, passed=z == "GOOD", label=z.lower(), explanation=summary,
            evidence=evidence, failed_claims=failed, credit_score=credit,
            details={
                "credit_score": credit, "zone": z, "high": high, "low": low,
                "facts": [{"id": f.id, "text": f.text} for f in facts],
                "reasoning": [{"id": c.id, "premises": list(c.premises), "conclusion": c.text}
                              for c in chains],
                "errors": [e.to_dict() for e in errors],
                "raised": sum(e.raised_by is not None for e in errors),
                **({"level_notes": level_notes} if level_notes else {}),
                "verify_model": verify_model or None,
                "judge_models": calls.models,
            }))
