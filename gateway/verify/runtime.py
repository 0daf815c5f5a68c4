"""What verification keeps between requests: the runtime the lifespan creates.

A :class:`Runtime` owns the long-lived resources of verification — the policy
store, the judge, the telemetry — and its caches: the layer instances of each
policy version, each policy's corpus, the per-level pipeline plans, and the context
preparations in flight (:mod:`gateway.verify.prepare`). It holds no HTTP object:
``gateway.runtime.open_runtime`` builds one from :class:`~gateway.settings.Settings`
alone, in the serving process or in any other (a shadow worker).

The caches are keyed by policy name and version and pruned when the live policy
set changes (:meth:`Runtime.prune`); a job of a version replaced meanwhile rebuilds
what it needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from gateway.layers.base import Judge, Layer, LayerResources
from gateway.sources.corpus import CorpusCache, CorpusError, resolve_corpus_dir
from gateway.telemetry import Telemetry
from gateway.verify.pipeline import PlanCache
from gateway.verify.prepare import Preparations

if TYPE_CHECKING:
    from gateway.policy.loader import Policy, ResolvedLayer
    from gateway.policy.store import PolicyStore
    from gateway.verify.job import PolicyRef

__all__ = ["CORPUS_RECHECK_S", "Runtime"]

log = logging.getLogger("gateway.verify")

CORPUS_RECHECK_S = 1.0
"""A policy's corpus directory is re-checked (files stat'ed) at most this often, the
policy store's poll interval: an added, edited or removed file is picked up live."""


class _CorpusEntry:
    """One policy version's corpus, when to re-check it, and its last load error."""

    __slots__ = ("corpus", "error", "next_check")

    def __init__(self) -> None:
        self.corpus: Mapping[str, str] = {}
        self.error: str | None = None
        self.next_check = 0.0


class Runtime:
    """The resources and caches of verification (see the module docstring)."""

    def __init__(self, *, policies: PolicyStore, judge: Judge | None,
                 telemetry: Telemetry) -> None:
        self.policies = policies
        self.judge = judge
        """Shared by every model-based layer; ``None`` when no judge can be reached."""
        self.telemetry = telemetry
        self.corpora = CorpusCache()
        self.plans = PlanCache()
        self.prepared = Preparations(self)
        self._layers: dict[tuple[str, str, str], Layer] = {}
        self._corpus: dict[tuple[str, str], _CorpusEntry] = {}
        self._seen: object = None

    def policy(self, ref: PolicyRef) -> Policy | None:
        """The policy a job names, if its version is still known to the store."""
        return self.policies.resolve(ref.name, ref.version)

    def prune(self) -> None:
        """Forget what the policy versions no longer live were using (called when the
        policy set changes; cheap when it did not)."""
        live_set = self.policies.policies
        if live_set is self._seen:
            return
        live = {(p.name, p.version) for p in live_set.values()}
        for key in [k for k in self._layers if k[:2] not in live]:
            del self._layers[key]
        for ckey in [k for k in self._corpus if k not in live]:
            del self._corpus[ckey]
        self.plans.keep(live)
        self._seen = live_set

    def corpus(self, policy: Policy) -> Mapping[str, str]:
        """The policy's corpus: empty unless ``corpus`` is in ``context.sources`` (the
        loader requires ``corpus_dir`` with it). Re-checked at most every
        :data:`CORPUS_RECHECK_S`: :class:`CorpusCache` stats the files and returns the
        same corpus while nothing changed. A corpus that cannot be (re)loaded keeps the
        last good one (none at first), logging each problem once."""
        key = (policy.name, policy.version)
        entry = self._corpus.get(key)
        now = time.monotonic()
        if entry is not None and now < entry.next_check:
            return entry.corpus
        if entry is None:
            entry = self._corpus[key] = _CorpusEntry()
        ctx = policy.spec.context
        if not ctx.corpus_dir or "corpus" not in ctx.sources:
            entry.next_check = float("inf")
            return entry.corpus
        entry.next_check = now + CORPUS_RECHECK_S
        path = resolve_corpus_dir(ctx.corpus_dir, policy.source)
        try:
            entry.corpus = self.corpora.load(path)
            entry.error = None
        except (CorpusError, OSError) as exc:
            if str(exc) != entry.error:
                entry.error = str(exc)
                log.error("policy %r: corpus %s cannot be loaded (%s); citations resolve "
                          "against %s", policy.name, path, exc,
                          "the last good corpus" if entry.corpus else "nothing")
        return entry.corpus

    def layer_factory(self, policy: Policy) -> Callable[[ResolvedLayer], Layer]:
        """The (cached) layer instances of ``policy``: one per policy version and key."""
        def layer_for(rl: ResolvedLayer) -> Layer:
            key = (policy.name, policy.version, rl.key)
            layer = self._layers.get(key)
            if layer is None:
                resources = LayerResources(judge=self.judge, corpus=self.corpus(policy))
                layer = self._layers[key] = rl.cls(rl.config, resources)
            return layer
        return layer_for
