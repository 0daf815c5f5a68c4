"""Security regression fixtures: a hostile upstream, and gateways capped small in front of it.

The engine's ``start_gateway`` (policy files, audit access) is reused as is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from modes.conftest import start_gateway  # noqa: F401 - the fixture, reused here
from security.hostile import HostileUpstream, MiB

CAP = 1 * MiB
"""``max_response_bytes`` of the gateways under test."""


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as up:
        yield up


@pytest.fixture
def capped(hostile: HostileUpstream) -> list[dict[str, Any]]:
    """``upstreams``: every hostile behaviour, routed by a model of its name, each capped
    at :data:`CAP`."""
    hostile.clear()
    return hostile.upstreams(max_response_bytes=CAP)
