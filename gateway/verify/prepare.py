"""Context-side work started while the upstream is still answering (inline policies).

An inline policy's layers may do their context-side work before the answer exists
(:class:`~gateway.layers.base.Preparing`: the grounding layer indexes the context).
:meth:`Preparations.start` schedules it for one request, keyed by its audit id,
when the request goes upstream; :meth:`Verifier.verify
<gateway.verify.verifier.Verifier.verify>` finds it again by the job's audit id
(:meth:`Preparations.context`) and uses the prepared context; the request ends it
(:meth:`Preparations.discard`, in a ``finally``). An entry lives exactly as long as
its request: the cache holds the requests in flight, nothing more. A job verified
elsewhere (another process) simply finds none and extracts the context itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from gateway.layers.base import Preparing
from gateway.telemetry import PrepareSpan
from gateway.verify.scope import BoundedContext, bounded_context

if TYPE_CHECKING:
    from gateway.policy.loader import Policy
    from gateway.verify.runtime import Runtime

__all__ = ["PREPARE_AFTER_S", "Preparations"]

log = logging.getLogger("gateway.engine")

PREPARE_AFTER_S = 0.001
"""A preparation starts this long after it is scheduled (the request is written to
the upstream by then), or as soon as the answer arrives, whichever is first."""


@dataclass(slots=True)
class _Preparation:
    policy: Policy
    task: asyncio.Task[BoundedContext | None]
    go: asyncio.Event
    span: PrepareSpan


class Preparations:
    """The preparations of the requests in flight, by audit id."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._entries: dict[str, _Preparation] = {}
        self._kinds: dict[type, bool] = {}
        """Layer class -> whether it is :class:`Preparing` (one per class: ``isinstance``
        against a runtime-checkable Protocol walks the class's attributes every time,
        15-50 us per layer of every inline request)."""

    def __len__(self) -> int:
        return len(self._entries)

    def start(self, key: str, policy: Policy, messages: Sequence[Mapping[str, Any]],
              span: PrepareSpan) -> None:
        """Start the context-side work of ``policy``'s :class:`Preparing` layers for the
        request ``key``, to overlap the upstream call.

        Call it just before the request goes upstream. The work starts
        :data:`PREPARE_AFTER_S` later (by then a pooled connection has written the
        request: aiohttp writes a body from a task of its own, which a preparation
        started at once would hold back) or when verification needs it, whichever is
        first. Never fails the request: any error leaves verification to extract the
        context itself. The work is ``span`` (the request's ``prepare context`` span),
        ended by :meth:`discard`.
        """
        layer_for = self._runtime.layer_factory(policy)
        try:
            preparing = [(rl.key, cast(Preparing, layer)) for rl in policy.layers
                         if self._preparing(layer := layer_for(rl))]
        except Exception:  # noqa: BLE001 - an optimization must not fail the request
            log.exception("policy %r: preparing its layers failed", policy.name)
            return
        if not preparing:
            return
        go = asyncio.Event()
        runtime = self._runtime

        async def run() -> BoundedContext | None:
            # Let the request go out first: aiohttp writes the body from a task of its
            # own, queued after this one; starting at once would hold it back for the
            # whole preparation. context() sets ``go`` when the answer is already here.
            with suppress(TimeoutError):
                async with asyncio.timeout(PREPARE_AFTER_S):
                    await go.wait()
            try:
                with span:  # records an exception, and re-raises it
                    bounded = bounded_context(messages, policy.spec.context,
                                              runtime.corpus(policy))
                    context = bounded.context  # within context.max_chars
                    span.context_chars(sum(len(d.text) for d in context.documents))
                    for layer_key, layer in preparing:
                        span.layer(layer_key)
                        layer.prepare(context)
            except Exception:  # noqa: BLE001 - verify() then starts from scratch
                log.exception("policy %r: preparing the context failed", policy.name)
                return None
            return bounded

        task = asyncio.get_running_loop().create_task(run())
        self._entries[key] = _Preparation(policy, task, go, span)

    def _preparing(self, layer: object) -> bool:
        kind = type(layer)
        got = self._kinds.get(kind)
        if got is None:
            got = self._kinds[kind] = isinstance(layer, Preparing)
        return got

    async def context(self, key: str, policy: Policy) -> BoundedContext | None:
        """The context prepared for request ``key`` and ``policy`` (waiting for the work
        to finish, or starting it now), or None when there is none to use."""
        prep = self._entries.get(key)
        if prep is None or prep.policy is not policy:
            return None
        prep.go.set()  # not started yet: start now, the answer is waiting
        result = await prep.task
        if result is not None:
            prep.span.used()
        return result

    def discard(self, key: str) -> None:
        """The request is done: cancel a preparation that has not started, and end its
        span (if it started)."""
        prep = self._entries.pop(key, None)
        if prep is None:
            return
        if not prep.task.done():
            prep.task.cancel()
        prep.span.end()
