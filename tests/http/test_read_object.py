"""read_object: a large body's duplicate-key scan runs off the event loop's thread, and
still refuses a duplicate key."""

from __future__ import annotations

import asyncio
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

import gateway.http.asgi as asgi
from gateway.errors import InvalidRequest
from gateway.http.asgi import LARGE_BODY, read_object
from gateway.wire.duplicates import duplicate_key
from serving import GatewayFactory


def _body(size: int, *, twice: bool) -> bytes:
    tail = b', "model": "b"}' if twice else b"}"
    return (b'{"model": "a", "messages": [{"role": "user", "content": "'
            + b"x" * size + b'"}]' + tail)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    threads: list[int] = []

    def spy(body: bytes) -> Any:
        threads.append(threading.get_ident())
        return duplicate_key(body)
    monkeypatch.setattr(asgi, "duplicate_key", spy)
    return threads


def test_a_large_body_is_scanned_on_another_thread(scans: list[int]) -> None:
    payload = asyncio.run(read_object(_body(LARGE_BODY, twice=False)))
    assert payload["model"] == "a" and len(payload["messages"][0]["content"]) == LARGE_BODY
    assert len(scans) == 1 and scans[0] != threading.get_ident()


def test_a_duplicate_key_in_a_large_body_is_still_refused(scans: list[int]) -> None:
    with pytest.raises(InvalidRequest) as caught:
        asyncio.run(read_object(_body(LARGE_BODY, twice=True)))
    assert caught.value.code == "duplicate_key" and "'model'" in str(caught.value)
    assert len(scans) == 1


def test_a_small_body_is_checked_in_place() -> None:
    with pytest.raises(InvalidRequest) as caught:
        asyncio.run(read_object(_body(10, twice=True)))
    assert caught.value.code == "duplicate_key"
    assert asyncio.run(read_object(_body(10, twice=False)))["model"] == "a"


def test_with_an_offload_the_body_is_parsed_by_it_with_the_same_errors() -> None:
    # The seam (``Engine.offload``): read_object hands the whole parse to the callable
    # (a worker process in the product) and settles its answer like its own parse.
    calls: list[int] = []

    async def offload(fn: Any, arg: bytes) -> Any:
        calls.append(len(arg))
        return pickle.loads(pickle.dumps(fn(arg)))  # what crosses the process boundary
    small = _body(10, twice=False)
    assert asyncio.run(read_object(small, offload))["model"] == "a" and calls == [len(small)]
    for body, code in [(_body(10, twice=True), "duplicate_key"), (b'{"model": ', "invalid_json"),
                       (b"[1, 2]", None)]:
        with pytest.raises(InvalidRequest) as caught:
            asyncio.run(read_object(body, offload))
        with pytest.raises(InvalidRequest) as here:
            asyncio.run(read_object(body))
        assert caught.value.body() == here.value.body() and caught.value.code == code
        assert type(caught.value) is type(here.value)
    assert len(calls) == 4


def test_without_a_pool_the_engine_offloads_nothing(make_gateway: GatewayFactory,
                                                     tmp_path: Path) -> None:
    # pool.workers 0 (the in-process test gateways): no offload at any size, so
    # read_object keeps the relay's own path (a thread for the scan, above).
    (tmp_path / "p.yaml").write_text("mode: shadow\ndefault: true\nlayers: [{name: keyword, "
                                     "config: {block: [x]}}]\n", encoding="utf-8")
    gw = make_gateway(policies_dir=str(tmp_path), pool={"workers": 0, "parse_min_bytes": 0})
    proxy = gw.app.proxy
    assert proxy is not None and proxy.engine is not None
    assert proxy.engine.offload(100 * 1024 * 1024) is None
