"""Replay: recorded requests re-verified under another policy, compared with the record.

The promote-a-candidate workflow (docs/policies.md): take audit records that hold
content — their policy recorded the (redacted) messages and answer
(``telemetry.record_content``) — rebuild each one's
:class:`~gateway.verify.job.VerificationJob` from them, and run
:meth:`Verifier.verify <gateway.verify.verifier.Verifier.verify>` with the policy
under test. No upstream is called (the answer is the recorded one); a model-based
layer calls the configured judge as it would in the gateway. The result counts the
verdict and action transitions (recorded → replayed), what promoting the policy would
block more or fewer, and each layer's fire rate, beside the recorded one for layers
of the same key. Nothing is written to the audit.

The text replayed is what the record holds: after the recording policy's redaction,
and each message flattened to its text (images and tool calls are not recorded).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.audit.report import BLOCKING, NOT_VERIFIED, render_table
from gateway.policy.loader import Policy
from gateway.verify.actions import band_action
from gateway.verify.job import PolicyRef, VerificationJob
from gateway.verify.verifier import Verifier

__all__ = ["ReplayResult", "job_for", "merge_results", "render_replay", "replay"]

CHANGED_SHOWN = 20
"""Records whose verdict changed, listed by id at most."""


def job_for(record: Mapping[str, Any], policy: Policy) -> VerificationJob | None:
    """The job that re-verifies ``record``'s answer with ``policy``; None without content."""
    content = record.get("content")
    if not isinstance(content, Mapping):
        return None
    messages = [dict(m) for m in content.get("messages") or () if isinstance(m, Mapping)]
    output = content.get("output")
    if not isinstance(output, str):
        return None
    answer = {"object": "chat.completion", "model": record.get("model") or "",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": output}}]}
    return VerificationJob(
        messages=messages, answer=answer, policy=PolicyRef(policy.name, policy.version),
        audit_id=str(record.get("audit_id") or ""), mode="replay",
        model=str(record.get("model") or ""), tenant=record.get("tenant"),
        started_at=str(record.get("started_at") or ""))


@dataclass
class ReplayResult:
    policy: str
    selected: int = 0
    """Records the filters selected (with content or not)."""
    replayed: int = 0
    errors: int = 0
    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)
    actions: Counter[tuple[str, str]] = field(default_factory=Counter)
    block_more: int = 0
    block_fewer: int = 0
    layers: dict[str, dict[str, int]] = field(default_factory=dict)
    """Layer key -> ``runs``, ``fired``, ``errors`` (replayed) and ``recorded_runs``,
    ``recorded_fired`` (the same key in the records, when their policy had it)."""
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    """The first :data:`CHANGED_SHOWN` records whose verdict changed, in the order of
    the records given (whatever order they finished in, and however many processes
    verified them)."""
    changed_at: list[int] = field(default_factory=list)
    """Each ``changed`` entry's position in the records given (for merging)."""
    recorded: dict[str, dict[str, int]] = field(default_factory=dict)
    """Layer key -> ``runs``, ``fired`` in the records (every key; ``layers`` shows
    those the replayed policy ran)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "selected": self.selected, "replayed": self.replayed,
            "errors": self.errors,
            "verdicts": [{"recorded": a, "replayed": b, "count": n}
                         for (a, b), n in sorted(self.verdicts.items())],
            "actions": [{"recorded": a, "replayed": b, "count": n}
                        for (a, b), n in sorted(self.actions.items())],
            "would_block_more": self.block_more, "would_block_fewer": self.block_fewer,
            "layers": self.layers,
            "changed": [{"audit_id": i, "recorded": a, "replayed": b}
                        for i, a, b in self.changed],
        }


def _layer(result: ReplayResult, key: str) -> dict[str, int]:
    return result.layers.setdefault(key, {"runs": 0, "fired": 0, "errors": 0,
                                          "recorded_runs": 0, "recorded_fired": 0})


async def replay(records: Iterable[Mapping[str, Any]], verifier: Verifier, policy: Policy,
                 *, concurrency: int = 4, positions: Iterable[int] | None = None,
                 ) -> ReplayResult:
    """Re-verify each record that holds content (the others are skipped); ``positions``
    are the records' places in a larger selection (default 0, 1, …), which orders
    ``changed``."""
    result = ReplayResult(policy.name)
    recs = list(records)
    places = list(positions) if positions is not None else list(range(len(recs)))
    jobs = [(at, rec, job) for at, rec in zip(places, recs, strict=True)
            if (job := job_for(rec, policy)) is not None]
    gate = asyncio.Semaphore(max(1, concurrency))
    changes: list[tuple[int, str, str, str]] = []

    async def one(at: int, rec: Mapping[str, Any], job: VerificationJob) -> None:
        async with gate:
            try:
                v = await verifier.verify(job, policy=policy)
            except Exception:  # a broken record never stops the replay
                result.errors += 1
                return
        old_v = str(rec.get("verdict") or NOT_VERIFIED)
        old_a = str(rec.get("action") or "none")
        new_a = band_action(policy.spec.actions, v.verdict).type
        result.replayed += 1
        result.verdicts[(old_v, v.verdict)] += 1
        result.actions[(old_a, new_a)] += 1
        if new_a in BLOCKING and old_a not in BLOCKING:
            result.block_more += 1
        elif old_a in BLOCKING and new_a not in BLOCKING:
            result.block_fewer += 1
        if old_v != v.verdict:
            changes.append((at, str(rec.get("audit_id")), old_v, v.verdict))
        for lay in v.layers:
            row = _layer(result, lay.key)
            row["runs"] += 1
            row["errors"] += bool(lay.error)
            row["fired"] += lay.passed is False and not lay.error and not lay.skipped
        for lay in rec.get("layers") or ():
            if isinstance(lay, Mapping) and lay.get("key") is not None:
                row = result.recorded.setdefault(str(lay["key"]), {"runs": 0, "fired": 0})
                row["runs"] += 1
                row["fired"] += (lay.get("passed") is False and not lay.get("error")
                                 and not lay.get("skipped"))

    await asyncio.gather(*(one(at, rec, job) for at, rec, job in jobs))
    _settle(result, changes)
    return result


def _settle(result: ReplayResult, changes: list[tuple[int, str, str, str]]) -> None:
    """``changed`` from every change, and the recorded columns of ``layers``."""
    first = sorted(changes)[:CHANGED_SHOWN]
    result.changed = [(i, a, b) for _, i, a, b in first]
    result.changed_at = [at for at, *_ in first]
    for key, row in result.layers.items():
        seen = result.recorded.get(key, {})
        row["recorded_runs"] = seen.get("runs", 0)
        row["recorded_fired"] = seen.get("fired", 0)


def merge_results(parts: Iterable[ReplayResult]) -> ReplayResult:
    """One result from the results of disjoint shares of the records (what replaying
    them all at once gives: counts summed, ``changed`` in the records' order)."""
    parts = list(parts)
    out = ReplayResult(parts[0].policy if parts else "")
    changes: list[tuple[int, str, str, str]] = []
    for part in parts:
        out.selected += part.selected
        out.replayed += part.replayed
        out.errors += part.errors
        out.verdicts.update(part.verdicts)
        out.actions.update(part.actions)
        out.block_more += part.block_more
        out.block_fewer += part.block_fewer
        for key, row in part.layers.items():
            mine = _layer(out, key)
            for k in ("runs", "fired", "errors"):
                mine[k] += row[k]
        for key, seen in part.recorded.items():
            tally = out.recorded.setdefault(key, {"runs": 0, "fired": 0})
            tally["runs"] += seen["runs"]
            tally["fired"] += seen["fired"]
        changes += [(at, *c) for at, c in zip(part.changed_at, part.changed, strict=True)]
    _settle(out, changes)
    return out


def render_replay(result: ReplayResult) -> str:
    out = [f"replayed {result.replayed} of {result.selected} selected records under "
           f"{result.policy}" + (f" ({result.errors} failed)" if result.errors else ""),
           f"promoting {result.policy} would have blocked {result.block_more} more, "
           f"{result.block_fewer} fewer", "", "verdicts (recorded -> replayed):"]
    out += render_table(("recorded", "replayed", "count"),
                        [(a, b, n) for (a, b), n in sorted(result.verdicts.items())],
                        right=(False, False, True))
    out += ["", "actions (recorded -> replayed):"]
    out += render_table(("recorded", "replayed", "count"),
                        [(a, b, n) for (a, b), n in sorted(result.actions.items())],
                        right=(False, False, True))
    out += ["", "layers (fired = failed; recorded: the same layer key in the records):"]
    out += render_table(
        ("layer", "runs", "fired", "fire %", "errors", "recorded runs", "recorded fired"),
        [(k, v["runs"], v["fired"], f"{100 * v['fired'] / v['runs']:.1f}" if v["runs"] else "—",
          v["errors"], v["recorded_runs"], v["recorded_fired"])
         for k, v in sorted(result.layers.items())], right=(False, *([True] * 6)))
    if result.changed:
        out += ["", "verdict changed (first records):"]
        out += [f"  {i}  {a} -> {b}" for i, a, b in result.changed]
    return "\n".join(out)
