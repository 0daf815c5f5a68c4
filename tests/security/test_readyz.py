"""``/readyz`` tells a probe "ready" or "not ready", and nobody else anything (issue 10, item 8).

Its detail names policy files (paths) and their configuration errors, and the shadow
queue's state. Without a key (a Kubernetes probe, or anyone) a real gateway answers
the status only; in gateway-keys mode a valid key sees the detail, a wrong one is a
401; in forward mode there is no key to check, so the detail is off unless the
operator sets ``readyz_detail: public``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

GATEWAY_KEY = "gw-readyz-test-key-0007"
KEYS = {"keys": [{"name": "ops", "tenant": "acme", "key": GATEWAY_KEY}]}
GOOD = "layers: [{name: length, config: {min_chars: 1}}]\n"
BROKEN = "layers: [{name: no-such-layer}]\n"


def policies(tmp_path: Path, *, broken: bool) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "good.yaml").write_text(GOOD)
    if broken:
        (directory / "secret-internal-name.yaml").write_text(BROKEN)
    return directory


def readyz(gw: Any, key: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.get(gw.url + "/readyz", headers=headers)


@pytest.mark.parametrize("broken, status, word", [(False, 200, "ready"),
                                                  (True, 503, "not ready")])
def test_without_a_key_only_the_status(make_gateway: Callable[..., Any], tmp_path: Path,
                                       broken: bool, status: int, word: str) -> None:
    directory = policies(tmp_path, broken=broken)
    for auth in (KEYS, {}):  # gateway-keys mode, then forward mode
        gw = make_gateway(policies_dir=str(directory), reload_policies=False, auth=auth)
        r = readyz(gw)
        assert (r.status_code, r.json()) == (status, {"status": word})
        assert str(tmp_path) not in r.text and "no-such-layer" not in r.text
        if not auth:  # forward mode: a client's own key proves nothing to the gateway
            r = readyz(gw, key="sk-some-client-openai-key")
            assert (r.status_code, r.json()) == (status, {"status": word})
        gw.stop()


def test_a_gateway_key_sees_the_detail_a_wrong_one_is_refused(
        make_gateway: Callable[..., Any], tmp_path: Path) -> None:
    directory = policies(tmp_path, broken=True)
    gw = make_gateway(policies_dir=str(directory), reload_policies=False, auth=KEYS)
    r = readyz(gw, key=GATEWAY_KEY)
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    broken = r.json()["broken"]
    (path,) = broken
    assert path.endswith("secret-internal-name.yaml")
    assert "unknown layer 'no-such-layer'" in broken[path]["error"]
    assert r.json()["policies"]["good"]["file"].endswith("good.yaml")
    assert "shadow" in r.json()

    wrong = readyz(gw, key="gw-not-a-key")
    assert wrong.status_code == 401
    assert set(wrong.json()["error"]) == {"message", "type", "param", "code"}
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert "secret-internal-name" not in wrong.text
    gw.stop()


def test_forward_mode_shows_the_detail_only_when_made_public(
        make_gateway: Callable[..., Any], tmp_path: Path) -> None:
    directory = policies(tmp_path, broken=True)
    gw = make_gateway(policies_dir=str(directory), reload_policies=False,
                      readyz_detail="public")
    r = readyz(gw)
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    assert any(p.endswith("secret-internal-name.yaml") for p in r.json()["broken"])
    gw.stop()
