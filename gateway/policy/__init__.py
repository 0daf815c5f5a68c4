"""Policies: the strict schema (``models``), loading one file (``loader``, errors with
file/key/line from ``locate``), a reloadable directory (``store``), selection
(``select``). See ``docs/policies.md``.

Names are re-exported lazily so that importing ``gateway.policy.models`` (which the
verification modules do) never pulls in the loader and the layer registry: no import
cycle between ``gateway.policy`` and ``gateway.verify``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Policy", "PolicyError", "PolicySet", "PolicySpec", "PolicyStore", "ResolvedLayer",
    "Selection", "load_policy_file", "load_policy_text", "select_policy",
]

_HOME = {
    "PolicySpec": "gateway.policy.models",
    "PolicySet": "gateway.policy.select",
    "PolicyStore": "gateway.policy.store",
    "Selection": "gateway.policy.select",
    "select_policy": "gateway.policy.select",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'gateway.policy' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME.get(name, "gateway.policy.loader")), name)
