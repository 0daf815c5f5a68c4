"""Verification layers: the contract (:mod:`~gateway.layers.base`), the registry
(:mod:`~gateway.layers.registry`) and one module per layer. Layers read the request,
the answer and the grounding context and return a score; they never touch HTTP,
policies or telemetry."""
