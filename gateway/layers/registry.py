"""The layer registry: a policy's layer name -> its implementation.

A :class:`LayerRegistry` maps names to ``"module:Class"`` import strings (or to
classes), resolved when a policy names them (uvicorn ``config.py`` style: naming a
layer costs nothing until a policy uses it). An unknown name is a hard error at
policy load time (:meth:`LayerRegistry.resolve` raises ``KeyError`` naming the known
ones). Registries are immutable values: :data:`BUILTIN` is the shipped set, and
:meth:`LayerRegistry.with_layers` makes another one with more (or other) layers.
The registry a gateway uses is passed in (``create_app(settings, layers=…)``, the
policy loader's and store's ``layers`` argument), never patched.

Adding a layer: one file in ``gateway/layers/`` (the contract is
``gateway/layers/base.py``), one line in :data:`BUILTIN_LAYERS` below, its tests;
``tests/layers/test_conformance.py`` checks every registered layer.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.layers.base import Layer

__all__ = ["BUILTIN", "BUILTIN_LAYERS", "LayerRegistry", "known", "resolve"]

BUILTIN_LAYERS: Mapping[str, str] = MappingProxyType({
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
    # model-based (judge): seed 000 layer 2
    "fact-decomposition": "gateway.layers.fact_decomposition:FactDecompositionLayer",
    "multi-source": "gateway.layers.multi_source:MultiSourceLayer",  # seed 000 layer 3
})

class LayerRegistry(Mapping[str, "str | type[Layer]"]):
    """Layer name -> ``"module:Class"`` (or the class itself). Immutable."""

    __slots__ = ("_targets",)

    def __init__(self, targets: Mapping[str, str | type[Layer]]) -> None:
        self._targets: Mapping[str, str | type[Layer]] = MappingProxyType(dict(targets))

    def __getitem__(self, name: str) -> str | type[Layer]:
        return self._targets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __repr__(self) -> str:
        return f"LayerRegistry({sorted(self._targets)})"

    def with_layers(self, extra: Mapping[str, str | type[Layer]]) -> LayerRegistry:
        """A registry with ``extra`` added (a name already here is replaced)."""
        return LayerRegistry({**self._targets, **extra})

    def known(self) -> list[str]:
        return sorted(self._targets)

    def resolve(self, name: str) -> type[Layer]:
        """The layer class registered as ``name``: ``KeyError`` naming the known ones
        when there is none, ``ImportError`` when its module cannot be imported.

        Not cached: it runs when a policy is loaded, and the import system keeps the
        modules."""
        try:
            target = self._targets[name]
        except KeyError:
            raise KeyError(f"unknown layer {name!r}; known layers: "
                           f"{', '.join(self.known())}") from None
        if not isinstance(target, str):
            return target
        module_name, _, attr = target.partition(":")
        module = importlib.import_module(module_name)
        cls: type[Layer] = getattr(module, attr)
        return cls


BUILTIN = LayerRegistry(BUILTIN_LAYERS)
"""The shipped layers: what a gateway uses unless it is given another registry."""


def known() -> list[str]:
    """The shipped layers' names."""
    return BUILTIN.known()


def resolve(name: str) -> type[Layer]:
    """The shipped layer registered as ``name`` (see :meth:`LayerRegistry.resolve`)."""
    return BUILTIN.resolve(name)
