"""Shared fixtures: real servers on loopback ports, and SDK clients in front of them.

- ``upstream`` — the scripted OpenAI-compatible upstream (``gateway.testing.scripted``) under
  uvicorn, shared per test module and reset before every test (recorded requests,
  ``cancelled`` counter, replies/rules/latencies back to how it started).
  ``ServedUpstream(app, server)`` wraps any other scripted upstream a module starts.
- ``make_gateway(**overrides)`` — start a gateway (uvicorn) with
  ``load_settings(environ={}, overrides=...)``. By default it has one upstream
  (``scripted``, every model) pointing at ``upstream``, an empty policies
  directory (pure pass-through) and an audit file in a temp dir. Servers live for
  the module; a test may stop one itself.
- ``gateway`` — the default pass-through gateway of the module.
- ``client`` / ``async_client`` — ``openai`` clients on ``gateway`` with
  ``max_retries=0``; ``make_client(gw, **kw)`` / ``make_async_client`` for others.
- ``wait_until(predicate, timeout=5.0)`` — bounded polling for an *event*
  (never a timing assertion).
- Every HTTP client made in this process with the default TLS settings (the SDK clients,
  ``httpx`` calls, the gateway's own upstream clients) shares one default SSL context:
  httpx and httpx2 (the SDKs' fork) build a fresh one per client (loading a CA bundle,
  50-100 ms of CPU), and the tests make thousands of clients, all over plain-HTTP loopback.
- ``quick_policy_watch`` — gateways started in the test poll their policies directory
  every 0.2 s, not every second (a change goes live after two polls that agree).

In this process, ``pool.workers`` unset means 0 (verification on the relay's event loop,
as the tests were written for: in-memory telemetry, custom layer registries); the
pool's own tests (``tests/pool``) set it. Gateways started as subprocesses keep the
product default (worker processes).

Async tests use the anyio plugin: ``@pytest.mark.anyio``.

The session starts by writing the bytecode of ``gateway/`` and ``bench/`` (``compileall``,
checked against the sources as Python always does): under ``PYTHONDONTWRITEBYTECODE`` every
gateway CLI, worker process and fresh interpreter the tests start would otherwise compile
the package from source again (about half of a fresh ``import gateway.app``'s CPU).
"""

from __future__ import annotations

import compileall
import importlib
import os
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.app import create_app
from gateway.policy.store import PolicyStore
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread
from gateway.settings import load_settings
from serving import CLIENT_KEY, GatewayFactory, ServedGateway, ServedUpstream
from serving import wait_until as _wait_until

__all__ = ["CLIENT_KEY", "GatewayFactory", "ServedGateway", "ServedUpstream"]  # re-exported


ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    for package in ("gateway", "bench"):
        if (ROOT / package).is_dir():
            compileall.compile_dir(ROOT / package, quiet=2)


def _shared_default(create: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    made: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def shared(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is not True or cert is not None:
            return create(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in made:
            made[key] = create(verify=verify, cert=cert, trust_env=trust_env)
        return made[key]

    return shared


@pytest.fixture(scope="session", autouse=True)
def _one_default_ssl_context() -> Iterator[None]:
    # httpx, and httpx2 (the fork the openai/anthropic SDKs use) where it is installed.
    with pytest.MonkeyPatch.context() as mp:
        for name in ("httpx._transports.default", "httpx2._transports.default"):
            try:
                transports = importlib.import_module(name)
            except ImportError:
                continue
            mp.setattr(transports, "create_ssl_context",
                       _shared_default(transports.create_ssl_context))
        yield


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _verification_in_process() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gateway.modes.dispatch.default_workers", lambda relays=1: 0)
        yield


# ---- the scripted upstream ---------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[ServedUpstream]:
    app = ScriptedUpstream()
    with ServerThread(app) as server:
        yield ServedUpstream(app, server)


@pytest.fixture
def upstream(upstream_server: ServedUpstream) -> ServedUpstream:
    """The module's scripted upstream, reset for this test."""
    upstream_server.reset()
    return upstream_server


# ---- gateways ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def make_gateway(upstream_server: ServedUpstream,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayFactory]:
    """``make_gateway(**settings_overrides)`` -> a running :class:`ServedGateway`.

    ``app_kwargs`` (a dict) is passed to ``create_app`` (e.g. ``engine_factory``).
    """
    started: list[ServerThread] = []
    base = tmp_path_factory.mktemp("gateway")
    policies = base / "policies"
    policies.mkdir()

    def factory(*, app_kwargs: dict[str, Any] | None = None,
                **overrides: Any) -> ServedGateway:
        defaults: dict[str, Any] = {
            "upstreams": [{"name": "scripted", "base_url": upstream_server.base_url}],
            "policies_dir": str(policies),
            "audit": {"path": str(base / f"audit-{len(started)}.jsonl")},
        }
        settings = load_settings(environ={}, overrides={**defaults, **overrides})
        server = ServerThread(create_app(settings, **(app_kwargs or {})))
        server.start()
        started.append(server)
        return ServedGateway(server, settings)

    yield factory
    for server in started:  # ask all to exit first: they shut down in parallel
        server.server.should_exit = True
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def gateway(make_gateway: GatewayFactory) -> ServedGateway:
    """The module's default gateway: pure pass-through to ``upstream``."""
    return make_gateway()


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("empty")


# ---- SDK clients -------------------------------------------------------------------------


@pytest.fixture
def make_client() -> Iterator[Callable[..., openai.OpenAI]]:
    clients: list[openai.OpenAI] = []

    def factory(gw: ServedGateway | str, **kwargs: Any) -> openai.OpenAI:
        base = gw if isinstance(gw, str) else gw.base_url
        kwargs.setdefault("api_key", CLIENT_KEY)
        kwargs.setdefault("max_retries", 0)
        c = openai.OpenAI(base_url=base, **kwargs)
        clients.append(c)
        return c

    yield factory
    for c in clients:
        c.close()


@pytest.fixture
def client(make_client: Callable[..., openai.OpenAI], gateway: ServedGateway) -> openai.OpenAI:
    return make_client(gateway)


@pytest.fixture
async def make_async_client(anyio_backend: str) -> AsyncIterator[Callable[..., openai.AsyncOpenAI]]:
    clients: list[openai.AsyncOpenAI] = []

    def factory(gw: ServedGateway | str, **kwargs: Any) -> openai.AsyncOpenAI:
        base = gw if isinstance(gw, str) else gw.base_url
        kwargs.setdefault("api_key", CLIENT_KEY)
        kwargs.setdefault("max_retries", 0)
        c = openai.AsyncOpenAI(base_url=base, **kwargs)
        clients.append(c)
        return c

    yield factory
    for c in clients:
        await c.close()


@pytest.fixture
async def async_client(make_async_client: Callable[..., openai.AsyncOpenAI],
                       gateway: ServedGateway) -> openai.AsyncOpenAI:
    return make_async_client(gateway)


# ---- helpers -----------------------------------------------------------------------------


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """Poll ``predicate`` until truthy (bounded); fail with ``message`` otherwise."""
    return _wait_until


@pytest.fixture
def quick_policy_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy watcher of gateways started in this test polls every 0.2 s: what the
    tests wait for is a change going live, not the product's one-second interval."""
    watch = PolicyStore.watch

    async def quick(self: PolicyStore, interval: float = 1.0,
                    on_change: Callable[[], None] | None = None) -> None:
        await watch(self, min(interval, 0.2), on_change)

    monkeypatch.setattr(PolicyStore, "watch", quick)
