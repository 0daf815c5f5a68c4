"""``x-verity-*`` header pairs: encoded once per (policy, mode), fresh list per response."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gateway.modes import headers as h


def _policy(name: str) -> Any:
    return SimpleNamespace(name=name)


def test_the_pairs_are_the_same_bytes_and_each_response_gets_its_own_list() -> None:
    h._pairs.clear()
    a = h.verity_headers(_policy("default"), "shadow", "ab" * 16)
    assert a == [(b"x-verity-policy", b"default"), (b"x-verity-mode", b"shadow"),
                 (b"x-verity-audit-id", b"ab" * 16)]
    a.append((b"x-extra", b"1"))  # a caller adds to its own list: the cache is untouched
    b = h.verity_headers(_policy("default"), "shadow")
    assert b == [(b"x-verity-policy", b"default"), (b"x-verity-mode", b"shadow")]
    assert h.verity_headers(_policy("default"), "inline")[1] == (b"x-verity-mode", b"inline")
    # Not latin-1: replaced, as before the cache (a header value is latin-1 on the wire).
    assert h.verity_headers(_policy("pol\u2028ï"), "shadow", "é\u263a")[::2] == [
        (b"x-verity-policy", b"pol?\xef"), (b"x-verity-audit-id", b"\xe9?")]


def test_the_cache_is_bounded() -> None:
    h._pairs.clear()
    for i in range(h._PAIRS_MAX + 5):
        assert h.verity_headers(_policy(f"p{i}"), "shadow")[0] == (
            b"x-verity-policy", f"p{i}".encode())
    assert len(h._pairs) <= h._PAIRS_MAX
