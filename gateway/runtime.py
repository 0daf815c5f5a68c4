"""The verification runtime, built from :class:`~gateway.settings.Settings` alone.

:func:`open_runtime` loads the policies directory into a
:class:`~gateway.policy.store.PolicyStore`, opens the judge the model-based layers
call (``gateway.upstream.judge``) and returns the :class:`~gateway.verify.runtime.
Runtime` that holds them and verification's caches; on exit it closes the judge. It
needs nothing of the HTTP side (no upstream pool, no request): the serving process
opens one in its lifespan (``gateway.modes.dispatch.open_engine``), and any other
process can open its own from the same settings to verify
:class:`~gateway.verify.job.VerificationJob` s::

    async with open_runtime(settings) as runtime:
        outcome = await Verifier(runtime).run(job, trace)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.policy.store import PolicyStore
from gateway.settings import Settings
from gateway.telemetry import Telemetry
from gateway.upstream.judge import create_judge
from gateway.verify.runtime import Runtime

__all__ = ["open_runtime"]


@asynccontextmanager
async def open_runtime(settings: Settings, *, telemetry: Telemetry | None = None,
                       layers: LayerRegistry = BUILTIN) -> AsyncIterator[Runtime]:
    """The runtime for ``settings`` (policies loaded, judge open), closed on exit.

    ``telemetry`` defaults to the no-op one; ``layers`` is the registry policy layer
    names resolve in."""
    telemetry = telemetry if telemetry is not None else Telemetry()
    directory = settings.resolved_policies_dir()
    # A fallback_model no upstream routes is reported at load (file, key), not at request time.
    store = PolicyStore(directory, route=settings.route if settings.upstreams else None,
                        layers=layers)
    await asyncio.to_thread(store.load)
    judge = create_judge(settings, telemetry)  # None when no judge can be reached
    try:
        yield Runtime(policies=store, judge=judge, telemetry=telemetry)
    finally:
        aclose = getattr(judge, "aclose", None)  # the Judge protocol has no close method
        if aclose is not None:
            await aclose()
