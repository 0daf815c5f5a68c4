"""Seed 000's claim-level mitigations: ``request-sources`` and ``decompose-and-retry``.

Both are upstream actions (``gateway.verify.actions.UPSTREAM_ACTIONS``); this module
holds what is theirs alone.

``request-sources`` is ``regenerate`` with another repair message
(:func:`sources_feedback`): the failed claims, and the ids of the sources the request
offers (:attr:`Verification.sources <gateway.verify.outcome.Verification.sources>`),
asking for an answer that cites, for each factual claim, the source it comes from and
leaves out what none supports. The attempt loop, re-verification, budget and history
are regenerate's. With no source to cite it applies its ``fallback`` at once.

``decompose-and-retry`` (:func:`decompose_and_retry`):

1. **Locate** each failed claim in the answer (:func:`locate`): the sentence that
   contains it, or covers at least :data:`MIN_COVERAGE` of its content words (a
   judge's rephrased atomic claim). Claims found nowhere are left as they are.
2. **Retry** (``mode: retry``) the first ``max_claims`` of them one by one: the
   request re-sent (the answer and a message asking about that claim alone,
   :func:`claim_feedback`), each reply verified alone with the policy (one attempt
   each, in ``trace.attempt(n)``, its verdict in ``attempt_history``). A reply that
   passes replaces the sentence; any other reply, an upstream error, a claim past
   ``max_claims``, or ``mode: drop`` (no call), and the sentence is **dropped**.
3. **Assemble** the answer from what is kept and what verified, with ``note``
   appended when something was dropped, and **verify** it once more (the last
   attempt). Its band's action is applied to it (``decompose-and-retry`` is
   reported unless it blocks); if that band's action calls the upstream again, or
   nothing is left of the answer, ``fallback`` is applied instead.

No attempt starts once the verification time budget is spent; the judge cost
budget is the request's (each verification sees what earlier ones spent). A
structured (JSON) answer cannot be cut into sentences: ``fallback`` at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.policy.models import DecomposeAndRetryAction, RequestSourcesAction
from gateway.text.tokens import Span, content_words, split_sentences, tokenize
from gateway.verify.outcome import Verification

if TYPE_CHECKING:
    from gateway.verify.actions import Applied, RegenContext

__all__ = ["MIN_COVERAGE", "assemble", "claim_feedback", "decompose_and_retry", "locate",
           "request_sources_feedback", "sources_feedback"]

MIN_COVERAGE = 0.6
"""Share of a claim's content words a sentence must hold to carry it."""
MAX_LISTED = 10
"""Claims listed in a repair message."""


def sources_feedback(claims: Sequence[str], sources: Sequence[str]) -> str:
    """The ``request-sources`` repair message: failed claims and the sources to cite."""
    listed = ", ".join(f"[{s}]" for s in sources)
    out = ["Your previous answer made claims that could not be verified against the "
           "provided sources."]
    if claims:
        out.append("Unverified claims:")
        out += [f'{i}. "{c}"' for i, c in enumerate(claims[:MAX_LISTED], 1)]
    out.append(f"Answer again using only the provided sources ({listed}). After each "
               "factual claim, cite the source it comes from by its id in square "
               f"brackets, e.g. [{sources[0]}]. Leave out anything none of these sources "
               "supports, and say so if that leaves the question unanswered.")
    return "\n".join(out)


def claim_feedback(claim: str) -> str:
    """The ``decompose-and-retry`` message about one unverified claim."""
    return ("One statement of your previous answer could not be verified:\n"
            f'"{claim}"\n'
            "Reply with that statement alone, corrected if it is wrong, in one or two "
            "sentences, using only what the provided context supports. If it cannot be "
            "supported, reply with nothing but: UNSUPPORTED")


def _covers(sentence: str, claim: str) -> float:
    if claim.strip() and claim.strip() in sentence:
        return 1.0
    want = content_words(tokenize(claim))
    if not want:
        return 0.0
    return len(want & content_words(tokenize(sentence))) / len(want)


def locate(answer: str, claims: Sequence[str]) -> tuple[list[Span], dict[int, int]]:
    """The answer's sentences, and claim index -> the sentence carrying it (the one
    covering most of it, at least :data:`MIN_COVERAGE`; first sentence on ties)."""
    spans = split_sentences(answer)
    where: dict[int, int] = {}
    for i, claim in enumerate(claims):
        scored = [(_covers(s.text, claim), -k) for k, s in enumerate(spans)]
        if scored:
            best, neg = max(scored)
            if best >= MIN_COVERAGE:
                where[i] = -neg
    return spans, where


def assemble(answer: str, spans: Sequence[Span], replace: dict[int, str | None]) -> str:
    """``answer`` with sentence ``k`` replaced by ``replace[k]`` (``None``: dropped);
    the text between sentences is kept (a dropped sentence takes its following gap)."""
    out: list[str] = []
    pos = 0
    for k, span in enumerate(spans):
        gap = answer[pos:span.start]
        pos = span.end
        if k not in replace:
            out += [gap, span.text]
        elif replace[k] is not None:
            out += [gap, str(replace[k])]
        elif not out:  # a dropped first sentence takes no leading gap with it
            continue
    out.append(answer[pos:])
    return "".join(out).strip()


def _calls(history: Sequence[dict[str, Any]]) -> int:
    """Upstream calls made (the entries that name a model)."""
    return sum(1 for e in history if "model" in e)


def _entry(n: int, v: Verification) -> dict[str, Any]:
    return {"attempt": n, "verdict": v.verdict, "score": v.score,
            "failed_claims": list(v.failed_claims), **v.judge_usage()}


async def decompose_and_retry(action: DecomposeAndRetryAction, completion: dict[str, Any],
                              v: Verification, ctx: RegenContext) -> Applied:
    """The ``decompose-and-retry`` action (see the module docstring)."""
    from gateway.verify.actions import apply_static, band_action, fill_template, needs_upstream

    fmt = ctx.fmt
    history: list[dict[str, Any]] = [_entry(0, v)]

    def fallback(current: dict[str, Any], cur_v: Verification, note: str) -> Applied:
        applied = apply_static(action.fallback, current, cur_v, ctx.policy, fmt)
        applied.modified = applied.modified or current is not completion
        applied.attempts, applied.history = _calls(history), history
        applied.note = f"decompose-and-retry: {note}; fallback {action.fallback.type}"
        return applied

    if fmt.structured(ctx.payload):
        return fallback(completion, v, "a structured (JSON) answer has no sentences")
    answer = fmt.answer_text(completion)
    spans, where = locate(answer, v.failed_claims)
    if not where:
        return fallback(completion, v, "no failed claim found in the answer's sentences")
    replace: dict[int, str | None] = {k: None for k in where.values()}
    stopped = False
    if action.mode == "retry":
        for i, k in list(where.items())[: action.max_claims]:
            if ctx.time_left is not None and ctx.time_left() <= 0:
                stopped = True
                break
            claim = v.failed_claims[i]
            payload = fmt.regenerate_body(ctx.payload, list(ctx.messages), answer,
                                          claim_feedback(claim), None)
            entry: dict[str, Any] = {"attempt": len(history), "model": payload.get("model"),
                                     "claim": i + 1}
            history.append(entry)
            with ctx.attempt(entry["attempt"]):
                parsed = await ctx.answer(payload, entry)
                if parsed is None:
                    continue
                text = fmt.answer_text(parsed).strip()
                if not text:
                    entry["error"] = f"upstream answered {entry['status']}"
                    continue
                if "UNSUPPORTED" in text:
                    entry["result"] = "unsupported"
                    continue
                new_v = await ctx.verify(parsed)
            entry.update(_entry(entry["attempt"], new_v))
            if new_v.verdict == "pass":
                replace[k] = " ".join(text.split())
                entry["result"] = "replaced"
            else:
                entry["result"] = "dropped"
    dropped = sum(1 for t in replace.values() if t is None)
    text = assemble(answer, spans, replace)
    if not text:
        return fallback(completion, v, "nothing of the answer verified")
    if dropped and action.note:
        text += fill_template(action.note, v, ctx.policy)
    assembled = fmt.with_text(completion, text)
    if stopped or (ctx.time_left is not None and ctx.time_left() <= 0):
        return fallback(assembled, v, "the verification time budget is spent")
    n = len(history)
    entry = {"attempt": n, "assembled": True, "kept": len(spans) - dropped,
             "replaced": len(replace) - dropped, "dropped": dropped}
    history.append(entry)
    with ctx.attempt(n):
        final_v = await ctx.verify(assembled)
    entry.update(_entry(n, final_v))
    next_action = band_action(ctx.actions, final_v.verdict)
    if needs_upstream(next_action):
        return fallback(assembled, final_v, f"the assembled answer is {final_v.verdict}")
    applied = apply_static(next_action, assembled, final_v, ctx.policy, fmt)  # type: ignore[arg-type]
    entry["action"] = next_action.type
    if applied.error is None and next_action.type != "block":
        applied.action = "decompose-and-retry"
    applied.modified, applied.attempts, applied.history = True, _calls(history), history
    applied.note = (f"decompose-and-retry: {len(replace) - dropped} claim(s) replaced, "
                    f"{dropped} dropped")
    return applied


def request_sources_feedback(action: RequestSourcesAction, v: Verification, policy: str,
                             sources: Sequence[str]) -> str:
    """The repair message of one ``request-sources`` attempt."""
    if action.feedback_template is not None:
        from gateway.verify.actions import fill_template

        return fill_template(action.feedback_template, v, policy, str)
    return sources_feedback(v.failed_claims, sources)
