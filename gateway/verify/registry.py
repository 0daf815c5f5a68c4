"""The layer registry: a policy's layer name -> its implementation.

Import strings are resolved lazily (uvicorn ``config.py`` style), so naming a
layer costs nothing until a policy uses it. An unknown name is a hard error at
policy load time (:func:`resolve` raises ``KeyError`` with the known names).

Adding a layer: one file in ``gateway/layers/``, one line here, its tests.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.verify.base import Layer

__all__ = ["LAYERS", "known", "resolve"]

LAYERS: dict[str, str] = {
    # model-free
    "claims": "gateway.layers.claims:ClaimsLayer",
    "grounding": "gateway.layers.grounding:GroundingLayer",
    "citations": "gateway.layers.citations:CitationsLayer",
    # simple checks (useful in tests and as guards)
    "keyword": "gateway.layers.keyword:KeywordLayer",
    "length": "gateway.layers.length:LengthLayer",
    # model-based (judge): seed 000 layers 1, 4, 5
    "nli": "gateway.layers.nli:NliLayer",
    "self-consistency": "gateway.layers.self_consistency:SelfConsistencyLayer",
    "semantic-entropy": "gateway.layers.semantic_entropy:SemanticEntropyLayer",
    "audit": "gateway.layers.audit:AuditLayer",  # model-based (judge): seed 002
    "fact-check": "gateway.layers.fact_check:FactCheckLayer",  # model-based (judge): seed 004
}


def known() -> list[str]:
    return sorted(LAYERS)


@cache
def resolve(name: str) -> type[Layer]:
    """Return the layer class registered as ``name``."""
    try:
        target = LAYERS[name]
    except KeyError:
        raise KeyError(f"unknown layer {name!r}; known layers: {', '.join(known())}") from None
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    cls: type[Layer] = getattr(module, attr)
    return cls
