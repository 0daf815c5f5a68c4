"""Real servers for tests: handles on a running scripted upstream and gateway.

Import from here (``from serving import ServedGateway``), not from ``conftest``:
several ``conftest.py`` files share that module name. Fixtures are in
``tests/conftest.py``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.app import GatewayApp
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread
from gateway.settings import Settings

__all__ = ["CLIENT_KEY", "GatewayFactory", "ServedGateway", "ServedUpstream", "wait_until"]

CLIENT_KEY = "sk-client-test-key-0001"
"""The api_key the ``client`` fixtures send (forward mode passes it upstream)."""


_SETTABLE = ("replies", "rules", "default_reply", "models", "latency_ms", "chunk_delay_ms",
             "record", "failures", "fail_rate", "fail_status", "fail_retry_after",
             "responses_api")


@dataclass
class ServedUpstream:
    """A :class:`ScriptedUpstream` running under uvicorn; :meth:`reset` restores its start."""

    app: ScriptedUpstream
    server: ServerThread
    initial: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.initial = {name: copy.deepcopy(getattr(self.app, name)) for name in _SETTABLE}

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``…/v1``) to configure as an upstream."""
        return self.server.url + "/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.app.requests

    @property
    def cancelled(self) -> int:
        return self.app.cancelled

    def last(self, path: str | None = None) -> dict[str, Any]:
        """The last recorded request (optionally: the last one on ``path``)."""
        for req in reversed(self.app.requests):
            if path is None or req["path"] == path:
                return req
        raise AssertionError(f"upstream received no request{f' on {path}' if path else ''}")

    def reset(self) -> None:
        """Back to the configuration it started with; forget requests and cancellations."""
        for name, value in self.initial.items():
            setattr(self.app, name, copy.deepcopy(value))
        self.app.requests.clear()
        self.app.cancelled = 0


@dataclass
class ServedGateway:
    server: ServerThread
    settings: Settings
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def base_url(self) -> str:
        return self.server.url + "/v1"

    @property
    def app(self) -> GatewayApp:
        app: GatewayApp = self.server.config.app
        return app

    def stop(self) -> None:
        self.server.stop()


GatewayFactory = Callable[..., ServedGateway]


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0,
               message: str = "condition") -> Any:
    """Poll ``predicate`` until truthy (bounded): waiting for an event, not timing it."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} did not happen within {timeout}s")
        time.sleep(0.02)
