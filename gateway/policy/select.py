"""Which policy verifies a request (runs on every request, so it is precomputed).

Two kinds of policy, by what their ``match`` looks at (``MatchSpec.client_selected``):

- **assigned** — matched by what the operator controls or the request *is*: the
  authenticated ``tenants`` / ``keys``, the ``models``, the ``routes`` (or an empty
  match), and the ``default: true`` policy. An assigned policy is *enforced* unless it
  says ``enforce: false`` (the default policy: unless it says ``enforce: true``).
- **client-chosen** — what the client asks for: ``x-verity-policy: <name>``
  (``RequestInfo.requested_policy``) naming a policy with ``allow_header_selection``,
  or a policy whose match names ``headers`` / ``metadata`` the client sends.

Rules, in order:

1. The policy **assigned** to the request: the matching assigned policy with the
   highest ``priority`` (ties: the smaller name), else the default one, else none.
2. The client's **choice**: the ``x-verity-policy`` header if given (an empty value
   counts as absent), else the matching client-chosen policy with the highest
   priority. A choice is refused (:class:`~gateway.errors.PermissionDenied`, 403,
   never a silent fallback) when the caller may not choose
   (``policy_selection_not_allowed``: a gateway key without ``policy_selection``) or
   when the assigned policy is enforced and does not list the choice in
   ``allow_upgrade_to`` (``policy_enforced``). By header, a name that is unknown *or
   not offered to the caller's tenant/key* (its ``match.tenants``/``keys``) is a 400
   (``unknown_policy``, listing what the caller may select: other tenants' policies
   are not disclosed); one that does not allow header selection a 403
   (``policy_not_allowed``); one whose ``models``/``routes`` exclude the request a
   403 (``policy_not_offered``). An explicit header choice is not sampled.
3. No choice: the assigned policy; none: ``None``, pure pass-through.

A policy chosen by match or assigned applies its ``sample_rate``: an unsampled
request gets ``None`` (it does not fall through to another policy). ``metadata`` is
first bounded in depth and size (:func:`gateway.policy.bounds.check_metadata`, 400).

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
from gateway.policy.bounds import check_metadata
from gateway.types import LowerCaseHeaders

if TYPE_CHECKING:
    from gateway.policy.loader import Policy
    from gateway.policy.models import MatchSpec, PolicySpec
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
        """Every criterion: :meth:`caller`, :meth:`request` and :meth:`client` in one
        (inlined: it runs for every policy on every request)."""
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
        return self.client(info)

    def caller(self, info: RequestInfo) -> bool:
        """``tenants`` and ``keys``: the authenticated caller (never without gateway keys)."""
        if self.tenants is not None and (info.tenant is None
                                         or not self.tenants.match(info.tenant)):
            return False
        return self.keys is None or (info.key_name is not None
                                     and self.keys.match(info.key_name) is not None)

    def request(self, info: RequestInfo) -> bool:
        """``models`` and ``routes``."""
        if self.models is not None and not self.models.match(info.model):
            return False
        return self.routes is None or self.routes.match(info.route) is not None

    def client(self, info: RequestInfo) -> bool:
        """``headers`` and ``metadata``: what the client chooses to send."""
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
    if value is None and type(headers) is not LowerCaseHeaders:
        # RequestInfo promises lower-case names; tolerate others (a hand-built one)
        for key, v in headers.items():
            if key.lower() == name:
                return v
    return value


class PolicySet(Mapping[str, "Policy"]):
    """An immutable name -> policy mapping with the selection order precomputed."""

    __slots__ = ("_by_name", "_candidates", "_selections", "assigned", "chosen",
                 "chosen_headers", "default")

    def __init__(self, policies: Iterable[Policy]) -> None:
        self._by_name: dict[str, Policy] = {p.name: p for p in policies}
        ordered = sorted((p for p in self._by_name.values() if not p.spec.default),
                         key=lambda p: (-p.spec.priority, p.name))
        self.assigned: tuple[Policy, ...] = tuple(
            p for p in ordered if not p.spec.match.client_selected)
        """Non-default policies matched by tenants/keys/models/routes, by priority."""
        self.chosen: tuple[Policy, ...] = tuple(
            p for p in ordered if p.spec.match.client_selected)
        """Policies matched by headers/metadata (the client opts in), by priority."""
        self.chosen_headers: frozenset[str] = frozenset(
            name for p in self.chosen for name, _ in p.matcher.headers)
        """Every header name a :attr:`chosen` policy matches on: a request with none of
        them (and no metadata) can match none of those policies (each needs all of its
        headers and metadata keys present), so selection skips them."""
        defaults = sorted(p.name for p in self._by_name.values() if p.spec.default)
        self.default: Policy | None = self._by_name[defaults[0]] if defaults else None
        self._candidates = {
            p.name: tuple(self._by_name[c] for c in p.spec.candidates
                          if c in self._by_name and c != p.name)
            for p in self._by_name.values()
        }
        self._selections: dict[tuple[str, str], Selection] = {}

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

    def selection(self, policy: Policy, reason: str) -> Selection:
        """``policy`` selected for ``reason``, with its candidates (one value per pair:
        a :class:`Selection` is immutable)."""
        sel = self._selections.get((policy.name, reason))
        if sel is None or sel.policy is not policy:
            sel = self._selections[(policy.name, reason)] = Selection(
                policy, self.candidates(policy), reason)
        return sel


def select_policy(policies: Mapping[str, Policy], info: RequestInfo, *,
                  rand: Callable[[], float] = random.random) -> Selection | None:
    """The policy for ``info`` (see the module docstring), or None for pass-through."""
    pset = policies if isinstance(policies, PolicySet) else PolicySet(policies.values())
    if info.metadata:
        check_metadata(info.metadata)
    assigned = _assigned(pset, info)
    requested = (info.requested_policy or "").strip()
    if requested:
        policy = _by_header(pset, info, requested)
        _check_binding(assigned, policy, None)
        return pset.selection(policy, "header")
    chosen = pset.chosen
    if chosen and not info.metadata and type(info.headers) is LowerCaseHeaders \
            and pset.chosen_headers.isdisjoint(info.headers):
        chosen = ()  # none of the headers or metadata a chosen policy needs is present
    for policy in chosen:
        if policy.matcher(info):
            _check_grant(info, policy)
            _check_binding(assigned, policy, policy)
            return _sampled(pset, policy, "match", rand)
    if assigned is None:
        return None
    return _sampled(pset, assigned, "default" if assigned.spec.default else "match", rand)


def _assigned(pset: PolicySet, info: RequestInfo) -> Policy | None:
    for policy in pset.assigned:
        if policy.matcher(info):
            return policy
    return pset.default


def _by_header(pset: PolicySet, info: RequestInfo, requested: str) -> Policy:
    """The policy ``x-verity-policy`` names, if this caller may select it."""
    _check_grant(info, None)
    policy = pset.get(requested)
    if policy is None or not policy.matcher.caller(info):
        allowed = sorted(n for n, p in pset.items()
                         if p.spec.allow_header_selection and p.matcher.caller(info))
        raise InvalidRequest(
            f"unknown policy {_shown(requested)} in the {HEADER} header; policies that may "
            f"be selected: {', '.join(allowed) or 'none'}",
            param=HEADER, code="unknown_policy")
    if not policy.spec.allow_header_selection:
        raise PermissionDenied(
            f"policy {requested!r} may not be selected with the {HEADER} header "
            f"(it does not set allow_header_selection: true)",
            param=HEADER, code="policy_not_allowed")
    if not policy.matcher.request(info):
        raise PermissionDenied(
            f"policy {requested!r} is not offered for this request: its match limits it "
            f"to other models or routes (model {_shown(info.model)}, route {info.route})",
            param=HEADER, code="policy_not_offered")
    return policy


def _check_grant(info: RequestInfo, matched: Policy | None) -> None:
    """Refuse any choice from a caller not granted one (``matched``: the policy its
    headers/metadata chose; ``None``: the ``x-verity-policy`` header)."""
    if info.policy_selection:
        return
    via, param = _signals(matched)
    raise PermissionDenied(
        f"gateway key {info.key_name!r} may not choose its verification policy, as "
        f"{via} does: the operator has not granted it policy_selection (leave that out "
        f"to be served the policy assigned to the key)",
        param=param, code="policy_selection_not_allowed")


def _check_binding(assigned: Policy | None, chosen: Policy, matched: Policy | None) -> None:
    """Refuse a client's choice that would replace an enforced assigned policy
    (``matched`` as for :func:`_check_grant`)."""
    if (assigned is None or assigned.name == chosen.name or not assigned.spec.enforced
            or chosen.name in assigned.spec.allow_upgrade_to):
        return
    via, param = _signals(matched)
    spec = assigned.spec
    how = "enforce: true" if spec.enforce else "enforced by default: " + _assigned_by(spec)
    upgrades = ", ".join(spec.allow_upgrade_to) or "none"
    raise PermissionDenied(
        f"this request is bound to policy {assigned.name!r} ({how}); {via} cannot replace "
        f"it with {chosen.name!r}. Policies a client may switch to from it "
        f"(allow_upgrade_to): {upgrades}",
        param=param, code="policy_enforced")


def _assigned_by(spec: PolicySpec) -> str:
    match = spec.match
    named = [k for k in ("tenants", "keys", "models", "routes") if getattr(match, k)]
    return f"matched by {'/'.join(named)}"


def _signals(policy: Policy | None) -> tuple[str, str]:
    """(what the client sent that chose ``policy``, the error's ``param``): the
    ``x-verity-policy`` header for ``None``, else the policy's match headers/metadata."""
    if policy is None:
        return f"the {HEADER} header", HEADER
    match = policy.spec.match
    headers = sorted(h.lower() for h in match.headers)
    parts = [f"header {h}" for h in headers] + [f"metadata.{k}" for k in sorted(match.metadata)]
    return "the request's " + " and ".join(parts), headers[0] if headers else "metadata"


def _shown(value: str, limit: int = 64) -> str:
    """A client-sent value quoted in an error message, cut to ``limit`` characters."""
    return repr(value if len(value) <= limit else value[:limit] + "…")


def _sampled(pset: PolicySet, policy: Policy, reason: str,
             rand: Callable[[], float]) -> Selection | None:
    rate = policy.spec.sample_rate
    if rate < 1.0 and rand() >= rate:
        return None
    return pset.selection(policy, reason)
