"""Verification in worker processes: the relay's :class:`ProcessRunner`
(:mod:`gateway.pool.runner`) and the worker side (:mod:`gateway.pool.worker`).

``pool.workers`` (default: the cores the relay does not need) worker processes
verify shadow jobs, candidates and large inline verifications; ``0`` keeps every
job on the relay's event loop (``gateway.verify.runner.LocalRunner``).
"""

from gateway.pool.runner import ProcessRunner, default_workers

__all__ = ["ProcessRunner", "default_workers"]
