"""Which policy verifies a request (runs on every request, so it is precomputed).

Rules, in order:

1. ``x-verity-policy: <name>`` (``RequestInfo.requested_policy``) picks that
   policy if its ``allow_header_selection`` is true; a policy that does not allow
   it is a 403 (:class:`~gateway.errors.PermissionDenied`), an unknown name a 400
   (:class:`~gateway.errors.InvalidRequest`, ``param="x-verity-policy"``). An
   explicit choice is not sampled. An empty header value counts as absent.
2. Otherwise the matching non-default policy with the highest ``priority``
   (ties: the smaller name).
3. Otherwise the ``default: true`` policy.
4. Otherwise ``None``: pure pass-through.

In 2 and 3 the policy's ``sample_rate`` applies: an unsampled request gets
``None`` (it does not fall through to another policy).

``match`` criteria are compiled once per policy (:class:`Matcher`, built when
the policy is loaded) and the ordering once per policy set (:class:`PolicySet`,
built on each reload); a plain mapping works too, at the cost of a sort.
"""

from __future__ import annotations

import fnmatch
import json
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.errors import InvalidRequest, PermissionDenied

if TYPE_CHECKING:
    from gateway.policy.loader import Policy
    from gateway.policy.models import MatchSpec
    from gateway.types import RequestInfo

__all__ = ["Matcher", "PolicySet", "Selection", "select_policy"]

HEADER = "x-verity-policy"


@dataclass(frozen=True, slots=True)
class Selection:
    policy: Policy
    candidates: tuple[Policy, ...]
    """The policy's ``candidates`` that exist (unknown ones are reported by the store)."""
    reason: str
    """``header`` | ``match`` | ``default``."""


def _globs(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for a list of ``fnmatchcase`` globs (any may match); None when empty."""
    parts = [fnmatch.translate(p) for p in patterns]
    return re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None


def _text(value: Any) -> str:
    """Metadata values as matched: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


class Matcher:
    """A compiled ``MatchSpec``: every given criterion must match; empty matches all."""

    __slots__ = ("headers", "keys", "metadata", "models", "routes", "tenants")

    def __init__(self, spec: MatchSpec) -> None:
        self.models = _globs(spec.models)
        self.routes = _globs(spec.routes)
        self.tenants = _globs(spec.tenants)
        self.keys = _globs(spec.keys)
        self.headers = tuple((name.lower(), re.compile(fnmatch.translate(glob)))
                             for name, glob in spec.headers.items())
        self.metadata = tuple((key, re.compile(fnmatch.translate(glob)))
                              for key, glob in spec.metadata.items())

    def __call__(self, info: RequestInfo) -> bool:
        if self.models is not None and not self.models.match(info.model):
            return False
        if self.routes is not None and not self.routes.match(info.route):
            return False
        if self.tenants is not None and (info.tenant is None
                                         or not self.tenants.match(info.tenant)):
            return False
        if self.keys is not None and (info.key_name is None
                                      or not self.keys.match(info.key_name)):
            return False
        for name, pattern in self.headers:
            value = _header(info.headers, name)
            if value is None or not pattern.match(value):
                return False
        for key, pattern in self.metadata:
            if key not in info.metadata or not pattern.match(_text(info.metadata[key])):
                return False
        return True


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # RequestInfo promises lower-case names; tolerate others
        for key, v in headers.items():
            if key.lower() == name:
                return v
    return value


class PolicySet(Mapping[str, "Policy"]):
    """An immutable name -> policy mapping with the selection order precomputed."""

    __slots__ = ("_by_name", "_candidates", "default", "ordered")

    def __init__(self, policies: Iterable[Policy]) -> None:
        self._by_name: dict[str, Policy] = {p.name: p for p in policies}
        self.ordered: tuple[Policy, ...] = tuple(sorted(
            (p for p in self._by_name.values() if not p.spec.default),
            key=lambda p: (-p.spec.priority, p.name)))
        defaults = sorted(p.name for p in self._by_name.values() if p.spec.default)
        self.default: Policy | None = self._by_name[defaults[0]] if defaults else None
        self._candidates = {
            p.name: tuple(self._by_name[c] for c in p.spec.candidates
                          if c in self._by_name and c != p.name)
            for p in self._by_name.values()
        }

    def __getitem__(self, name: str) -> Policy:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"PolicySet({sorted(self._by_name)})"

    def candidates(self, policy: Policy) -> tuple[Policy, ...]:
        return self._candidates.get(policy.name, ())


def select_policy(policies: Mapping[str, Policy], info: RequestInfo, *,
                  rand: Callable[[], float] = random.random) -> Selection | None:
    """The policy for ``info`` (see the module docstring), or None for pass-through."""
    pset = policies if isinstance(policies, PolicySet) else PolicySet(policies.values())
    requested = (info.requested_policy or "").strip()
    if requested:
        policy = pset.get(requested)
        if policy is None:
            allowed = sorted(n for n, p in pset.items() if p.spec.allow_header_selection)
            raise InvalidRequest(
                f"unknown policy {requested!r} in the {HEADER} header; policies that may be "
                f"selected: {', '.join(allowed) or 'none'}",
                param=HEADER, code="unknown_policy")
        if not policy.spec.allow_header_selection:
            raise PermissionDenied(
                f"policy {requested!r} may not be selected with the {HEADER} header "
                f"(it does not set allow_header_selection: true)",
                param=HEADER, code="policy_not_allowed")
        return Selection(policy, pset.candidates(policy), "header")
    for policy in pset.ordered:
        if policy.matcher(info):
            return _sampled(pset, policy, "match", rand)
    if pset.default is not None:
        return _sampled(pset, pset.default, "default", rand)
    return None


def _sampled(pset: PolicySet, policy: Policy, reason: str,
             rand: Callable[[], float]) -> Selection | None:
    rate = policy.spec.sample_rate
    if rate < 1.0 and rand() >= rate:
        return None
    return Selection(policy, pset.candidates(policy), reason)
