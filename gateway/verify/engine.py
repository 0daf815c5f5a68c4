"""The verification engine (policy selection, pipeline, actions, shadow).

Placeholder until the policy engine lands: no policies, pure pass-through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.proxy import Engine, Proxy
    from gateway.settings import Settings
    from gateway.telemetry import Telemetry


@asynccontextmanager
async def open_engine(settings: Settings, telemetry: Telemetry,
                      proxy: Proxy) -> AsyncIterator[Engine | None]:
    """Start the engine for the app's lifetime; yield None when nothing to verify."""
    yield None


