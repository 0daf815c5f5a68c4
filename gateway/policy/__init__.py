"""Policies: the strict schema (``models``), the risk profiles it refers to
(``profiles``), loading one file (``loader``, errors with file/key/line from
``locate``), a reloadable directory (``store``), selection (``select``) and the
metadata bounds selection enforces (``bounds``). See ``docs/policies.md``.

Below ``gateway.verify`` (which runs policies) and above ``gateway.layers`` (whose
registry resolves a policy's layer names): nothing here imports verification.
"""

from __future__ import annotations

from gateway.policy.loader import (
    Policy,
    PolicyError,
    ResolvedLayer,
    load_policy_file,
    load_policy_text,
)
from gateway.policy.models import PolicySpec
from gateway.policy.select import PolicySet, Selection, select_policy
from gateway.policy.store import PolicyStore

__all__ = [
    "Policy", "PolicyError", "PolicySet", "PolicySpec", "PolicyStore", "ResolvedLayer",
    "Selection", "load_policy_file", "load_policy_text", "select_policy",
]
