"""The verification engine: policy selection, inline and shadow handling, audit.

:func:`open_engine` (called by the app lifespan) loads the policies directory into
a :class:`~gateway.policy.store.PolicyStore`, starts its reload watcher, the
shadow queue and the audit sink, and yields a :class:`VerityEngine`. A policies
directory that does not exist yields ``None`` (pure pass-through; ``/readyz`` is
ready); an empty one yields an engine that selects nothing until a file appears.

Per request (:meth:`VerityEngine.handle`), by the selected policy's ``mode``:

- **shadow** — the client gets exactly the upstream bytes (same status and
  headers, plus ``x-verity-policy``, ``x-verity-mode``, ``x-verity-audit-id``);
  streams are relayed chunk by chunk as they arrive. Verification is then
  queued on the shadow queue; its outcome (with the action that *would* have been
  taken) goes to the audit sink and a shadow trace linked to the request (see
  ``gateway.verify.shadow_mode``).
- **inline** — verify, apply the band's action (``gateway.verify.actions``) and
  answer with ``x-verity-*`` headers; streams per ``streaming`` (see
  ``gateway.verify.inline`` and ``gateway.verify.streaming``).

Upstream errors (status ≥ 400) pass through unverified, with policy and mode
headers and no audit record. An upstream *success* that is not a chat completion
is audited as not verified; inline, ``on_error`` decides between a 502 and the
bytes with ``n/a`` verdict headers (``gateway.verify.inline``). An upstream call that fails
before the client got a byte (connect error 502, timeout 504, a stream cut while
``streaming: buffer`` reads it 502) is the gateway's own error: it carries policy,
mode and audit-id headers, and a record with ``note: "not verified: <code>"`` is
written (:meth:`VerityEngine._upstream_failed`; only that error path does work).
A client that disconnects cancels the request (the proxy's disconnect watcher); the
request is still accounted for: a record with ``note: "not verified: client
disconnected …"`` (before the response was sent, or after how much of a stream) is
written (:meth:`VerityEngine._client_gone`), unless the upstream answered an error.
A policy's ``candidates`` are evaluated on the same answer in the shadow queue;
their outcomes are added to the live outcome's audit record (written once they
finish), never affecting the response.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

from gateway.audit.sink import AuditSink, open_audit_sink
from gateway.errors import UpstreamError
from gateway.layers.base import Judge, Layer, LayerResources, Preparing, VerifyInput
from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.policy.loader import Policy, ResolvedLayer
from gateway.policy.select import Selection, select_policy
from gateway.policy.store import PolicyStore
from gateway.proxy import ChatExchange
from gateway.redact import exception_summary, exception_trace, redact_secrets
from gateway.shadow import ShadowJob, ShadowQueue
from gateway.sources.context import GroundingContext, extract_context, message_text
from gateway.sources.corpus import CorpusCache, CorpusError, resolve_corpus_dir
from gateway.telemetry import RequestTrace, Telemetry
from gateway.types import RequestInfo
from gateway.upstream.judge import create_judge
from gateway.verify.actions import answer_text, band_action
from gateway.verify.outcome import CandidateOutcome, Outcome, Verification
from gateway.verify.pipeline import Budget, min_confidence_for, run_pipeline

if TYPE_CHECKING:
    from gateway.proxy import Engine, Proxy
    from gateway.settings import Settings

__all__ = ["VerityEngine", "open_engine", "verity_headers"]

log = logging.getLogger("gateway.engine")

_NOOP_DECISION = RequestTrace.decision
_NOOP_COUNT = Telemetry.count
_PREPARED = "verity.prepared"
"""``ChatExchange.extra`` key of :meth:`VerityEngine.prepare`'s (policy, task, start event,
span)."""
_TRACKED = "verity.tracked"
"""``ChatExchange.extra`` key of the request's (outcome, progress) (:meth:`VerityEngine.track`)."""
_PREPARE_AFTER_S = 0.001
"""A preparation starts this long after it is scheduled (the request is written to
the upstream by then), or as soon as the answer arrives, whichever is first."""
_CORPUS_RECHECK_S = 1.0
"""A policy's corpus directory is re-checked (files stat'ed) at most this often, the
policy store's poll interval: an added, edited or removed file is picked up live."""


class _CorpusEntry:
    """One policy version's corpus, when to re-check it, and its last load error."""

    __slots__ = ("corpus", "error", "next_check")

    def __init__(self) -> None:
        self.corpus: Mapping[str, str] = {}
        self.error: str | None = None
        self.next_check = 0.0

Headers = list[tuple[bytes, bytes]]
Progress = Callable[[], tuple[str, "str | None"]]
"""How much of the response the client got: (the note's wording, the response id seen)."""


def _h(name: str, value: str) -> tuple[bytes, bytes]:
    return name.encode("latin-1"), value.encode("latin-1", "replace")


def verity_headers(policy: Policy, mode: str, audit_id: str | None = None) -> Headers:
    out = [_h("x-verity-policy", policy.name), _h("x-verity-mode", mode)]
    if audit_id is not None:
        out.append(_h("x-verity-audit-id", audit_id))
    return out


def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in ("text", "input_text") \
        and isinstance(part.get("text"), str)


def is_completion(parsed: Any) -> bool:
    """A chat completion the layers can read: a non-empty ``choices`` list of objects,
    each with a ``message`` object whose ``content`` is a string, null or a list of
    text parts (``{"type": "text" | "input_text", "text": str}``, as
    :func:`gateway.sources.context.message_text` reads them). Any other shape is unverifiable."""
    if not isinstance(parsed, dict):
        return False
    choices = parsed.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            return False
        content = message.get("content")
        if content is not None and not isinstance(content, str) and not (
                isinstance(content, list) and all(_is_text_part(p) for p in content)):
            return False
    return True


def calls_only(completion: Mapping[str, Any]) -> bool:
    """Choice 0 is tool (or function) calls with no text: nothing for a layer to check."""
    first = (completion.get("choices") or (None,))[0]
    message = first.get("message") if isinstance(first, Mapping) else None
    return (isinstance(message, Mapping)
            and bool(message.get("tool_calls") or message.get("function_call"))
            and not answer_text(completion))


def _not_verified(policy: Policy, note: str) -> Verification:
    """A pass with no layers run (``score: null``): the answer flows unchanged."""
    level = policy.spec.risk.level
    level = "low" if level == "assess" else level  # what the assessor says of no text
    return Verification(risk_level=level, layers=[], verdict="pass", score=None,
                        min_confidence=min_confidence_for(policy, level), note=note)


class VerityEngine:
    """The :class:`~gateway.proxy.Engine` the proxy hands matching requests to."""

    def __init__(self, settings: Settings, telemetry: Telemetry, store: PolicyStore,
                 shadow: ShadowQueue, audit: AuditSink, judge: Judge | None = None) -> None:
        self.settings = settings
        self.telemetry = telemetry
        self.store = store
        self.shadow = shadow
        self.audit = audit
        self.judge = judge
        """Shared by every model-based layer; created and closed by :func:`open_engine`."""
        self._layers: dict[tuple[str, str, str], Layer] = {}
        self._corpora: dict[tuple[str, str], _CorpusEntry] = {}
        self._corpus_cache = CorpusCache()
        self._seen_set: object = None

    # ---- Engine protocol -----------------------------------------------------------------

    def select(self, info: RequestInfo) -> Selection | None:
        policies = self.store.policies
        if policies is not self._seen_set:
            self._prune(policies)
        return select_policy(policies, info)

    async def handle(self, proxy: Proxy, exchange: ChatExchange, plan: Selection) -> None:
        from gateway.verify import inline, shadow_mode

        try:
            if plan.policy.spec.mode == "shadow":
                await shadow_mode.handle(self, proxy, exchange, plan)
            else:
                await inline.handle(self, proxy, exchange, plan)
        except UpstreamError as err:  # the gateway answers with this error, no byte sent yet
            self._upstream_failed(exchange, plan.policy, err)
            raise
        except asyncio.CancelledError:  # re-raised: the proxy decides what a cancel means
            if exchange.watcher.disconnected:
                self._client_gone(exchange, plan.policy)
            raise

    def track(self, x: ChatExchange, outcome: Outcome, progress: Progress | None = None) -> None:
        """Make ``outcome`` the record written if the client disconnects before it is
        finished; ``progress`` (kept once given) tells how much of a stream it got."""
        got = x.extra.get(_TRACKED)
        x.extra[_TRACKED] = (outcome, progress or (got[1] if got is not None else None))

    @staticmethod
    def untrack(x: ChatExchange) -> None:
        """A background job writes the record from now on (not the disconnect path)."""
        x.extra.pop(_TRACKED, None)

    def _client_gone(self, x: ChatExchange, policy: Policy) -> None:
        """The client disconnected (its request is being cancelled): write the record of
        what is known — the tracked outcome (its audit id may have been sent), else a new
        one. An upstream error being relayed unverified gets none, as when the client stays.
        Runs inside ``except CancelledError``: no await, and no exception escapes."""
        try:
            got = x.extra.pop(_TRACKED, None)
            if got is None:
                if x.status >= 400:
                    return
                outcome = self.new_outcome(policy, x, policy.spec.mode)
                progress = None
            else:
                outcome, progress = got
                if outcome.finished_at is not None:  # already written (or being written)
                    return
            if outcome.upstream_status is None:
                outcome.upstream_status = x.status or None
            if progress is not None:
                detail, response_id = progress()
                outcome.response_id = outcome.response_id or response_id
            elif outcome.response_id is None:
                detail = "before the response was sent"
            else:  # the answer is in, its verification (or a regenerate call) was running
                detail = "before the response was sent, while verifying the answer"
                if outcome.attempts:
                    detail += f" (regenerate attempt {outcome.attempts})"
            outcome.note = f"not verified: client disconnected {detail}"
            self.finish(outcome, x.trace)
        except Exception:  # noqa: BLE001 - the cancellation must go on
            log.exception("policy %r: the record of a request cut by its client failed",
                          policy.name)

    def _upstream_failed(self, x: ChatExchange, policy: Policy, err: UpstreamError) -> None:
        """The upstream call failed before the client got a byte (connect error, timeout,
        a stream cut while buffered): name the policy on the error response and account
        for the request with a record (``x.status`` is the upstream's status, if it
        answered at all)."""
        mode = policy.spec.mode
        outcome = self.new_outcome(policy, x, mode)
        outcome.upstream_status = x.status or None
        outcome.note = f"not verified: {err.code}"
        err.headers.update((k.decode("latin-1"), v.decode("latin-1"))
                           for k, v in verity_headers(policy, mode, outcome.audit_id))
        self.finish(outcome, x.trace)

    def status(self) -> tuple[bool, dict[str, Any]]:
        ready, detail = self.store.status()
        shadow = self.shadow.status()
        return ready and shadow["accepting"], {**detail, "shadow": shadow}

    # ---- layers and verification ---------------------------------------------------------

    def _prune(self, policies: Mapping[str, Policy]) -> None:
        live = {(p.name, p.version) for p in policies.values()}
        for key in [k for k in self._layers if k[:2] not in live]:
            del self._layers[key]
        for ckey in [k for k in self._corpora if k not in live]:
            del self._corpora[ckey]
        self._seen_set = policies

    def corpus(self, policy: Policy) -> Mapping[str, str]:
        """The policy's corpus: empty unless ``corpus`` is in ``context.sources`` (the
        loader requires ``corpus_dir`` with it). Re-checked at most every
        ``_CORPUS_RECHECK_S``: :class:`CorpusCache` stats the files and returns the same
        cached :class:`~gateway.sources.corpus.Corpus` while nothing changed. A corpus that cannot
        be (re)loaded keeps the last good one (none at first), logging each problem once."""
        key = (policy.name, policy.version)
        entry = self._corpora.get(key)
        now = time.monotonic()
        if entry is not None and now < entry.next_check:
            return entry.corpus
        if entry is None:
            entry = self._corpora[key] = _CorpusEntry()
        ctx = policy.spec.context
        if not ctx.corpus_dir or "corpus" not in ctx.sources:
            entry.next_check = float("inf")
            return entry.corpus
        entry.next_check = now + _CORPUS_RECHECK_S
        path = resolve_corpus_dir(ctx.corpus_dir, policy.source)
        try:
            entry.corpus = self._corpus_cache.load(path)
            entry.error = None
        except (CorpusError, OSError) as exc:
            if str(exc) != entry.error:
                entry.error = str(exc)
                log.error("policy %r: corpus %s cannot be loaded (%s); citations resolve "
                          "against %s", policy.name, path, exc,
                          "the last good corpus" if entry.corpus else "nothing")
        return entry.corpus

    def layer_factory(self, policy: Policy) -> Any:
        def layer_for(rl: ResolvedLayer) -> Layer:
            key = (policy.name, policy.version, rl.key)
            layer = self._layers.get(key)
            if layer is None:
                resources = LayerResources(judge=self.judge, corpus=self.corpus(policy))
                layer = self._layers[key] = rl.cls(rl.config, resources)
            return layer
        return layer_for

    async def verify(self, policy: Policy, x: ChatExchange, completion: Mapping[str, Any],
                     trace: RequestTrace, budget: Budget | None = None) -> Verification:
        text = answer_text(completion)
        if not text and calls_only(completion):  # a tool call: no text to verify
            return _not_verified(policy, "not verified: the answer is tool calls only")
        trace = trace.for_policy(policy.name)  # its verify spans name the policy
        messages = x.payload.get("messages") or []
        context = await self._prepared_context(policy, x)
        if context is None:
            context = extract_context(messages, policy.spec.context, self.corpus(policy))
        inp = VerifyInput(messages=messages, response_text=text,
                          context=context, model=x.info.model, metadata=x.info.metadata)
        v = await run_pipeline(policy, inp, layer_for=self.layer_factory(policy),
                               trace=trace, telemetry=self.telemetry, budget=budget)
        n = len(completion.get("choices") or ())
        if n > 1:  # n > 1: the verdict is choice 0's alone (docs/policies.md, Runtime)
            v.note = f"only choice 0 verified; choices 1-{n - 1} of n={n} were not"
        return v

    def prepare(self, policy: Policy, x: ChatExchange) -> None:
        """Start the context-side work of ``policy``'s layers (:class:`Preparing`) now,
        to overlap the upstream call; :meth:`verify` picks the result up.

        Call it just before the request goes upstream. The work starts
        ``_PREPARE_AFTER_S`` later (by then a pooled connection has written the
        request: aiohttp writes a body from a task of its own, which a preparation
        started at once would hold back) or when :meth:`verify` needs it, whichever is
        first. Never fails the request: any error leaves :meth:`verify` to extract the
        context itself. The work is the request's ``prepare context`` span
        (:meth:`RequestTrace.prepare`), ended by :meth:`discard_prepared`.
        """
        layer_for = self.layer_factory(policy)
        try:
            preparing = [(rl.key, layer) for rl in policy.layers
                         if isinstance(layer := layer_for(rl), Preparing)]
        except Exception:  # noqa: BLE001 - an optimization must not fail the request
            log.exception("policy %r: preparing its layers failed", policy.name)
            return
        if not preparing:
            return
        messages = x.payload.get("messages") or []
        go = asyncio.Event()
        span = x.trace.prepare()

        async def run() -> GroundingContext | None:
            # Let the request go out first: aiohttp writes the body from a task of its
            # own, queued after this one; starting at once would hold it back for the
            # whole preparation. verify() sets ``go`` when the answer is already here.
            with suppress(TimeoutError):
                async with asyncio.timeout(_PREPARE_AFTER_S):
                    await go.wait()
            try:
                with span:  # records an exception, and re-raises it
                    context = extract_context(messages, policy.spec.context,
                                              self.corpus(policy))
                    span.context_chars(sum(len(d.text) for d in context.documents))
                    for key, layer in preparing:
                        span.layer(key)
                        layer.prepare(context)
            except Exception:  # noqa: BLE001 - verify() then starts from scratch
                log.exception("policy %r: preparing the context failed", policy.name)
                return None
            return context

        x.extra[_PREPARED] = (policy, asyncio.get_running_loop().create_task(run()), go, span)

    async def _prepared_context(self, policy: Policy,
                                x: ChatExchange) -> GroundingContext | None:
        got = x.extra.get(_PREPARED)
        if got is None or got[0] is not policy:
            return None
        got[2].set()  # not started yet: start now, the answer is waiting
        result: GroundingContext | None = await got[1]
        if result is not None:
            got[3].used()
        return result

    @staticmethod
    def discard_prepared(x: ChatExchange) -> None:
        """Cancel a preparation that has not started (the request ended early), and end
        its span (if it started)."""
        got = x.extra.pop(_PREPARED, None)
        if got is None:
            return
        if not got[1].done():
            got[1].cancel()
        got[3].end()

    def new_outcome(self, policy: Policy, x: ChatExchange, mode: str) -> Outcome:
        return Outcome(policy=policy.name, policy_version=policy.version, mode=mode,
                       model=x.info.model, tenant=x.info.tenant, stream=x.stream,
                       streaming=policy.spec.streaming if x.stream else None)

    def record_content(self, policy: Policy, outcome: Outcome, trace: RequestTrace,
                       messages: Sequence[Mapping[str, Any]], output: str) -> None:
        """Message content in the record and trace, only when the policy opts in."""
        spec = policy.spec.telemetry
        if not spec.record_content:
            return
        patterns = [re.compile(p) for p in spec.redact]

        def redact(text: str) -> str:
            text = redact_secrets(text)
            for p in patterns:
                text = p.sub("[REDACTED]", text)
            return text

        outcome.content = {
            "messages": [{"role": m.get("role"), "content": redact(message_text(m))}
                         for m in messages if isinstance(m, Mapping)],
            "output": redact(output),
        }
        outcome.redact = redact  # failed claims are content: recorded only now, redacted
        trace.content(messages, output, redact)

    def finish(self, outcome: Outcome, trace: RequestTrace, *, write: bool = True) -> None:
        """Close the record: ``trace.decision``, metrics, and the audit (unless deferred).

        The audit sink gets the outcome itself and builds the record off the event
        loop (or never: the null sink); nothing may change ``outcome`` after it is
        written. The no-op trace's ``decision`` gets no record built for it.
        """
        outcome.finish()
        if type(trace).decision is not _NOOP_DECISION:
            trace.decision(outcome.to_dict())
        if type(self.telemetry).count is not _NOOP_COUNT:
            self.telemetry.count("verifications", 1, {
                "policy": outcome.policy, "mode": outcome.mode,
                "verdict": outcome.verdict or "none", "action": outcome.action or "none"})
        if write:
            self.audit.write(outcome)

    # ---- candidates ----------------------------------------------------------------------

    def submit_candidates(self, x: ChatExchange, plan: Selection, completion: Mapping[str, Any],
                          outcome: Outcome) -> bool:
        """Queue the candidates' evaluation; the job writes ``outcome`` to the audit.

        Returns False when there are no candidates (the caller writes the audit).
        """
        if not plan.candidates:
            return False
        shadow_trace = self.telemetry.start_shadow(x.trace, "candidate policies")

        async def run() -> None:
            try:
                for cand in plan.candidates:
                    outcome.candidates.append(await self.candidate(cand, x, completion,
                                                                    shadow_trace))
            finally:
                shadow_trace.end(200)
                self.audit.write(outcome)

        def dropped(why: str) -> None:
            names = {c.name for c in outcome.candidates}
            outcome.candidates.extend(CandidateOutcome(c.name, c.version, error=why)
                                      for c in plan.candidates if c.name not in names)
            shadow_trace.end(0, f"shadow_{why}")  # never started: write the record here
            self.audit.write(outcome)

        self.shadow.submit(ShadowJob(run, dropped, kind="candidates"))
        return True

    async def candidate(self, cand: Policy, x: ChatExchange, completion: Mapping[str, Any],
                         trace: RequestTrace) -> CandidateOutcome:
        try:
            # A span of its own: its verify spans are told apart from the live policy's.
            with trace.candidate(cand.name) as ctrace:
                v = await self.verify(cand, x, completion, ctrace)
                out = CandidateOutcome(cand.name, cand.version, verdict=v.verdict,
                                       score=v.score,
                                       action=band_action(cand.spec.actions, v.verdict).type,
                                       layers=v.layers)
                ctrace.decision({"policy": cand.name, "mode": "candidate",
                                 "verdict": out.verdict, "score": out.score,
                                 "action": out.action})
        except Exception as exc:  # a broken candidate never affects anything else
            # Its type and where, never its message (which may quote the answer).
            log.error("candidate policy %r failed: %s", cand.name, exception_trace(exc))
            return CandidateOutcome(cand.name, cand.version, error=exception_summary(exc))
        return out


@asynccontextmanager
async def open_engine(settings: Settings, telemetry: Telemetry, proxy: Proxy, *,
                      layers: LayerRegistry = BUILTIN) -> AsyncIterator[Engine | None]:
    """Run the engine for the app's lifetime; ``None`` when the policies dir is missing."""
    directory = settings.resolved_policies_dir()
    if not directory.is_dir():
        log.warning("policies directory %s %s: verification off (pass-through)", directory,
                    "is not a directory" if directory.exists() else "does not exist")
        yield None
        return
    # A fallback_model no upstream routes is reported at load (file, key), not at request time.
    store = PolicyStore(directory, route=settings.route if settings.upstreams else None,
                        layers=layers)
    await asyncio.to_thread(store.load)
    judge = create_judge(settings, telemetry)  # None when no judge can be reached
    shadow = ShadowQueue(settings.shadow, telemetry)
    shadow.start()
    audit = open_audit_sink(settings.audit.path)
    watcher = asyncio.create_task(store.watch()) if settings.reload_policies else None
    engine = VerityEngine(settings, telemetry, store, shadow, audit, judge)
    try:
        yield engine
    finally:
        if watcher is not None:
            watcher.cancel()
            with suppress(asyncio.CancelledError):
                await watcher
        await shadow.close()
        await asyncio.to_thread(audit.close)
        aclose = getattr(judge, "aclose", None)  # the Judge protocol has no close method
        if aclose is not None:
            await aclose()
