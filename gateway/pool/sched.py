"""The verification workers' CPU scheduling class per call (``pool.sched_idle``):
:class:`Scheduling`, used by :func:`gateway.pool.worker.serve`."""

from __future__ import annotations

import logging
import os
import threading

__all__ = ["Scheduling", "can_return_from_idle"]

log = logging.getLogger("gateway.pool")


class Scheduling:
    """``pool.sched_idle``: background jobs (:func:`gateway.pool.worker.run_job`) run in the ``SCHED_IDLE``
    scheduling class (Linux), on CPU time no normal process wants — the relay, and on a
    small box the upstream and the clients sharing it, always go first, and a relay
    waking up takes the core at once; a call a request awaits (an inline verification,
    a body parse) runs in the normal class at ``pool.nice``. Usable only where the
    thread may leave ``SCHED_IDLE`` again (root, ``CAP_SYS_NICE`` or a high enough
    ``RLIMIT_NICE``: tried once on a scratch thread at start): else, or where the OS
    has no such class, every call runs at ``pool.nice`` (:attr:`usable` False)."""

    def __init__(self, enabled: bool) -> None:
        self.idle = False
        self.usable = enabled and can_return_from_idle()

    def background(self, yes: bool) -> None:
        """The calling (main) thread's class for the next call: idle for a background job."""
        if not self.usable or yes == self.idle:
            return
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE if yes else os.SCHED_OTHER,
                                  os.sched_param(0))
        except OSError:  # refused after all: stay normal from now on
            if self.idle:
                log.warning("verification worker: cannot leave SCHED_IDLE; "
                            "inline calls now share the idle class")
            self.usable = False
            return
        self.idle = yes


def can_return_from_idle() -> bool:
    """Whether a thread of this process may enter ``SCHED_IDLE`` and leave it (a scratch
    thread tries both: the class is per thread)."""
    if not hasattr(os, "SCHED_IDLE") or not hasattr(os, "sched_setscheduler"):
        return False
    ok: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            ok.append(True)
        except OSError:
            pass
    t = threading.Thread(target=probe, name="sched-probe", daemon=True)
    t.start()
    t.join()
    return bool(ok)
