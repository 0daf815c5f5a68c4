"""The dashboard on the gateway itself (``audit.dashboard``), behind a gateway key."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.settings import ConfigError, load_settings
from gateway.testing.servers import ServerThread

KEYS = [{"name": "ops", "tenant": "internal", "key": "sk-ops-key-123"},
        {"name": "team", "tenant": "acme", "key": "sk-team-key-456"}]


@pytest.fixture(scope="module")
def gateway(audit_dir: Path) -> Iterator[ServerThread]:
    settings = load_settings(environ={}, overrides={
        "upstreams": [{"name": "u", "base_url": "http://127.0.0.1:9/v1"}],
        "auth": {"keys": KEYS}, "policies_dir": str(audit_dir / "no-policies"),
        "audit": {"path": str(audit_dir),
                  "dashboard": {"path": "/audit", "keys": ["ops"],
                                "jaeger_url": "http://jaeger:16686"}}})
    with ServerThread(create_app(settings)) as server:
        yield server


def get(server: ServerThread, path: str, auth: str | None = None) -> httpx.Response:
    headers = {"authorization": auth} if auth else {}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        return client.get(path, headers=headers)


def test_only_the_named_keys_open_the_pages(gateway: ServerThread) -> None:
    anonymous = get(gateway, "/audit/")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Basic")
    assert anonymous.json()["error"]["type"] == "authentication_error"
    other = get(gateway, "/audit/records", "Bearer sk-team-key-456")
    assert other.status_code == 403 and other.json()["error"]["code"] == "audit_not_allowed"
    assert get(gateway, "/audit/", "Bearer wrong").status_code == 401


def test_a_browser_logs_in_with_basic_and_links_stay_under_the_path(
        gateway: ServerThread) -> None:
    basic = "Basic " + base64.b64encode(b"anyone:sk-ops-key-123").decode()
    page = get(gateway, "/audit/", basic)
    assert page.status_code == 200 and "61 records" in page.text
    assert 'href="/audit/records' in page.text and 'href="/audit/static/style.css"' in page.text
    one = get(gateway, "/audit/records?verdict=fail", "Bearer sk-ops-key-123")
    assert one.status_code == 200 and one.text.count('href="/audit/records/') == 12
    moved = get(gateway, "/audit", basic)
    assert moved.status_code == 308 and moved.headers["location"] == "/audit/"
    assert get(gateway, "/auditx", basic).status_code == 404  # not under the path
    # The gateway's own paths are untouched.
    assert get(gateway, "/healthz").json() == {"status": "ok"}


def test_mounting_needs_named_keys(audit_dir: Path) -> None:
    for dashboard, words in (({"path": "/audit"}, "name the gateway keys"),
                             ({"path": "/audit", "keys": ["nobody"]}, "nobody not among"),
                             ({"path": "/v1/audit", "keys": ["ops"]}, "a path of its own")):
        with pytest.raises(ConfigError, match=words):
            load_settings(environ={}, overrides={
                "auth": {"keys": KEYS},
                "audit": {"path": str(audit_dir), "dashboard": dashboard}})
