"""The ``x-verity-*`` response headers (docs/policies.md lists them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.types import Headers

if TYPE_CHECKING:
    from gateway.policy.loader import Policy
    from gateway.verify.actions import Applied

__all__ = ["unverified_headers", "verdict_headers", "verity_headers"]


def _h(name: str, value: str) -> tuple[bytes, bytes]:
    return name.encode("latin-1"), value.encode("latin-1", "replace")


_PAIRS_MAX = 256
"""(policy, mode) header pairs kept encoded; past it the cache starts over."""
_pairs: dict[tuple[str, str], tuple[tuple[bytes, bytes], tuple[bytes, bytes]]] = {}


def verity_headers(policy: Policy, mode: str, audit_id: str | None = None) -> Headers:
    """``x-verity-policy``, ``-mode`` and (when a record is written) ``-audit-id``; the
    first two encoded once per (policy name, mode)."""
    key = (policy.name, mode)
    pairs = _pairs.get(key)
    if pairs is None:
        if len(_pairs) >= _PAIRS_MAX:
            _pairs.clear()
        pairs = _pairs[key] = (_h("x-verity-policy", policy.name), _h("x-verity-mode", mode))
    out = list(pairs)
    if audit_id is not None:
        out.append((b"x-verity-audit-id", audit_id.encode("latin-1", "replace")))
    return out


def verdict_headers(policy: Policy, audit_id: str, applied: Applied) -> Headers:
    """An inline verdict: policy, mode, audit id, verdict, score, action, layers (and
    attempts after regenerate)."""
    v = applied.verification
    out = verity_headers(policy, "inline", audit_id)
    out += [
        (b"x-verity-verdict", v.verdict.encode()),
        (b"x-verity-score", (b"n/a" if v.score is None else f"{v.score:.4f}".encode())),
        (b"x-verity-action", applied.action.encode()),
        # "n/a" (like the score) when no layer ran, e.g. an answer of tool calls only
        (b"x-verity-layers", (v.layers_header() or "n/a").encode("latin-1", "replace")),
    ]
    if applied.attempts:
        out.append((b"x-verity-attempts", str(applied.attempts).encode()))
    return out


def unverified_headers(policy: Policy, audit_id: str) -> Headers:
    """``fail_open``: the verdict headers of an answer nothing verified."""
    return verity_headers(policy, "inline", audit_id) + [
        (b"x-verity-verdict", b"n/a"), (b"x-verity-score", b"n/a"),
        (b"x-verity-action", b"pass"), (b"x-verity-layers", b"n/a")]
