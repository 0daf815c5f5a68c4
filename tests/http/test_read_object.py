"""read_object: a large body's duplicate-key scan runs off the event loop's thread, and
still refuses a duplicate key."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import gateway.http.asgi as asgi
from gateway.errors import InvalidRequest
from gateway.http.asgi import LARGE_BODY, read_object
from gateway.wire.duplicates import duplicate_key


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
