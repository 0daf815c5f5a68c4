"""A directory of policies, reloadable while serving.

:class:`PolicyStore` owns one policies directory. A file that breaks keeps its
last good version live (and is reported in :attr:`PolicyStore.errors` and
:meth:`PolicyStore.status`); the set-level rules (unique names, one default,
``candidates`` and ``allow_upgrade_to`` naming known policies) are checked across files by
:func:`assemble`, which ``gateway policy check`` uses too. Given the gateway's
routing (``route``: model -> upstream or ``None``, e.g. ``Settings.route``),
:func:`assemble` also reports a regenerate ``fallback_model`` that no upstream
serves; like an unknown candidate it is an error for the file, and the policy is
still served.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.layers.registry import BUILTIN, LayerRegistry
from gateway.policy.loader import Policy, _read, load_policy_text, policy_files
from gateway.policy.locate import PolicyError, _locate, _parse_yaml
from gateway.policy.models import RegenerateAction
from gateway.policy.select import PolicySet

__all__ = ["FileState", "PolicyStore", "Route", "assemble"]

Route = Callable[[str], object | None]
"""model name -> the upstream that serves it, or ``None`` (``Settings.route``)."""

log = logging.getLogger("gateway.policy")


@dataclass(slots=True)
class FileState:
    """What the store knows about one file: its newest parse and its last good version."""

    digest: str = ""
    text: str = ""
    parsed: Policy | None = None
    error: PolicyError | None = None
    good: Policy | None = None
    good_text: str = ""


def _unrouted_fallbacks(policy: Policy, text: str, file: str, route: Route) -> list[str]:
    """Errors for regenerate ``fallback_model`` values that ``route`` sends nowhere."""
    out = []
    for band in ("pass", "marginal", "fail"):
        action = policy.spec.actions.pass_ if band == "pass" else getattr(policy.spec.actions,
                                                                          band)
        model = action.fallback_model if isinstance(action, RegenerateAction) else None
        if model is None or route(model) is not None:
            continue
        key, line = _locate(_parse_yaml(text, file)[0], ("actions", band, "fallback_model"))
        out.append(str(PolicyError(
            file, key, line, f"no configured upstream serves model {model!r} (upstream "
                             f"`models` globs decide routing): the fallback attempt would "
                             f"fail at request time")))
    return out


def assemble(states: Mapping[str, FileState], prefer: Sequence[str] = (),
             route: Route | None = None) -> tuple[dict[str, Policy], dict[str, str]]:
    """Pick the live version of every file and apply the cross-file rules.

    Returns (file -> live policy, file -> error message). For each file the
    newest parse is tried, then its last good version. Names must be unique and
    only one policy may be ``default``: on a clash the file in ``prefer`` (the
    ones already live) or else the earlier file name keeps it. ``candidates`` or
    ``allow_upgrade_to`` naming unknown policies are an error for that file, but it
    stays live (an unknown upgrade is never allowed); so is a
    ``fallback_model`` that ``route`` (when given) finds no upstream for.
    """
    first = set(prefer)
    live: dict[str, Policy] = {}
    texts: dict[str, str] = {}
    owner: dict[str, str] = {}
    default_file: str | None = None
    messages: dict[str, list[str]] = {}
    for file in sorted(states, key=lambda f: (f not in first, f)):
        st = states[file]
        msgs = messages.setdefault(file, [st.error.describe()] if st.error else [])
        options = [(st.parsed, st.text)] if st.parsed is not None else []
        if st.good is not None and st.good is not st.parsed:
            options.append((st.good, st.good_text))
        for policy, text in options:
            # The YAML tree only locates a problem: parsed when there is one, not on
            # every watcher poll (a pure-Python parse of each file, every second, on
            # the relay process, holding the GIL).
            if policy.name in owner:
                key, line = _locate(_parse_yaml(text, file)[0], ("name",))
                problem = PolicyError(file, key if policy.spec.name else "", line,
                                      f"policy name {policy.name!r} is already used by "
                                      f"{owner[policy.name]}")
            elif policy.spec.default and default_file is not None:
                key, line = _locate(_parse_yaml(text, file)[0], ("default",))
                problem = PolicyError(file, key, line, f"more than one `default: true` policy "
                                                       f"(also {default_file})")
            else:
                live[file], texts[file], owner[policy.name] = policy, text, file
                if policy.spec.default:
                    default_file = file
                break
            if policy is st.parsed:
                msgs.append(str(problem))
    for file, policy in live.items():
        for field, names, self_ref in (
                ("candidates", policy.spec.candidates, "a policy cannot be its own candidate"),
                ("allow_upgrade_to", policy.spec.allow_upgrade_to, "a policy cannot list itself")):
            for i, cand in enumerate(names):
                if cand in owner and cand != policy.name:
                    continue
                key, line = _locate(_parse_yaml(texts[file], file)[0], (field, i))
                why = (self_ref if cand == policy.name else
                       f"unknown policy {cand!r} (known: {', '.join(sorted(owner))})")
                messages[file].append(str(PolicyError(file, key, line, why)))
        if route is not None:
            messages[file] += _unrouted_fallbacks(policy, texts[file], file, route)
    return live, {f: "\n".join(m) for f, m in messages.items() if m}


RECENT_VERSIONS = 64
"""Policy versions :meth:`PolicyStore.resolve` still finds after they were replaced."""

_GONE = ("", -1, -1)
"""The pending signature of a file that disappeared (see :meth:`PolicyStore.poll`)."""


class PolicyStore:
    """The policies of one directory, reloadable while serving.

    Files are polled (:meth:`watch`): each pass re-reads every policy file and
    compares content hashes, so edits, atomic renames and Kubernetes ConfigMap
    symlink swaps are all seen, whatever the file system's mtime granularity.
    A file that stops loading keeps its last good version live.

    While serving, a change is applied only once it has **settled** (:meth:`poll`):
    a file whose content changed must be seen again, unchanged (same content, size
    and mtime), by the next poll — a file being written slowly would otherwise go
    live half-written, as long as the half parses (a policy cut before its
    ``actions``, or in the middle of a ``block`` list, often does). A changed file
    that does not end with a newline looks cut short and is held back (an error for
    that file; its last good version stays live) until it does. A file that
    disappears is dropped once the next poll confirms it is gone (a delete-and-copy
    deploy does not leave its tenants unprotected in between). None of this can tell
    a writer that pauses longer than a poll from a finished file: deploy policies by
    writing a temporary file in the same directory and renaming it over the old one
    (atomic), or by a ConfigMap (an atomic symlink swap). :meth:`reload` (the initial
    load, and a manual reload) applies what it reads at once.

    ``route`` (``Settings.route``; leave it ``None`` when no upstream is configured)
    lets :func:`assemble` report ``fallback_model`` values no upstream serves;
    ``layers`` is the registry layer names are resolved in.
    """

    def __init__(self, directory: Path, *, route: Route | None = None,
                 layers: LayerRegistry = BUILTIN) -> None:
        self.directory = Path(directory)
        self._route = route
        self._layers = layers
        self._states: dict[str, FileState] = {}
        self._live: dict[str, Policy] = {}
        self._policies = PolicySet(())
        self._errors: dict[str, str] = {}
        self._loaded = False
        self._scanned_ok = False
        self._pending: dict[str, tuple[str, int, int]] = {}
        """File -> (digest, size, mtime_ns) of a change seen by one poll, not yet live."""
        self._recent: dict[tuple[str, str], Policy] = {}
        """(name, version) -> every policy version served lately, live ones included
        (:meth:`resolve`); bounded by :data:`RECENT_VERSIONS`, oldest first out."""
        self._lock = threading.Lock()

    @property
    def policies(self) -> PolicySet:
        """Live policies by name (immutable snapshot; replaced on reload)."""
        return self._policies

    @property
    def errors(self) -> Mapping[str, str]:
        """File -> error message for every file with a problem."""
        return types.MappingProxyType(self._errors)

    def get(self, name: str) -> Policy | None:
        return self._policies.get(name)

    def resolve(self, name: str, version: str) -> Policy | None:
        """The policy ``name`` at ``version``: the live one, or a version served lately
        (a verification job queued before a reload is verified with the version that
        was selected for its request); None when it is not known (any more)."""
        live = self._policies.get(name)
        if live is not None and live.version == version:
            return live
        return self._recent.get((name, version))
    def load(self) -> None:
        """Initial scan: good files are loaded, broken ones recorded in :attr:`errors`."""
        self.reload()

    def reload(self) -> bool:
        """Rescan the directory and apply what it holds now; return True if any policy
        or error changed."""
        with self._lock:
            return self._reload(settle=False)

    def poll(self) -> bool:
        """One watcher pass: like :meth:`reload`, but a change is applied only once it
        has settled (see the class docstring); return True if anything changed."""
        with self._lock:
            return self._reload(settle=True)

    def _settled(self, file: str, sig: tuple[str, int, int]) -> bool:
        """Whether the previous poll saw ``file`` exactly so (else remember it)."""
        if self._pending.get(file) == sig:
            del self._pending[file]
            return True
        self._pending[file] = sig
        return False

    def _scan(self, settle: bool) -> dict[str, FileState] | str:
        try:
            paths = policy_files(self.directory)
        except OSError as exc:
            return f"cannot read policies directory: {exc.strerror or exc}"
        states: dict[str, FileState] = {}
        for path in paths:
            file = str(path)
            old = self._states.get(file, FileState())
            try:
                stat = path.stat()
                text = _read(path)
            except (PolicyError, OSError) as exc:
                error = exc if isinstance(exc, PolicyError) else PolicyError(
                    file, "", None, f"cannot read: {exc.strerror or exc}")
                if settle and not self._settled(file, ("!" + error.message, -1, -1)):
                    if file in self._states:
                        states[file] = old
                    continue
                states[file] = FileState(error=error, good=old.good, good_text=old.good_text)
                continue
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if digest == old.digest:
                states[file] = old
                self._pending.pop(file, None)
                continue
            if settle and not self._settled(file, (digest, stat.st_size, stat.st_mtime_ns)):
                if file in self._states:
                    states[file] = old  # what is live stays live until the change settles
                continue
            st = FileState(digest=digest, text=text, good=old.good, good_text=old.good_text)
            if settle and text and not text.endswith("\n"):
                st.error = PolicyError(
                    file, "", text.count("\n") + 1,
                    "the file does not end with a newline: it looks cut short (a write "
                    "in progress?); it is loaded once it ends with one. Deploy policies "
                    "atomically: write a temporary file, then rename it over this one")
                states[file] = st
                continue
            try:
                st.parsed = load_policy_text(text, file, name=path.stem, path=path,
                                             layers=self._layers)
            except PolicyError as exc:
                st.error = exc
            states[file] = st
        for file, st in self._states.items():  # files gone since the last pass
            if file in states or not settle:
                continue
            if not self._settled(file, _GONE):
                states[file] = st  # gone for one poll only, maybe: keep it until confirmed
        seen = {str(p) for p in paths}
        for file in [f for f in self._pending if f not in seen and f not in self._states]:
            del self._pending[file]  # a change that vanished before it settled
        return states

    def _reload(self, settle: bool) -> bool:
        scanned = self._scan(settle)
        if isinstance(scanned, str):
            # Keep serving what we have: a directory that vanished mid-swap is not "no policies".
            errors = {str(self.directory): scanned}
            live, states = self._live, self._states
        else:
            states = scanned
            live, errors = assemble(states, prefer=list(self._live), route=self._route)
            for file, policy in live.items():
                if policy is states[file].parsed:
                    states[file].good, states[file].good_text = policy, states[file].text
        changed = (not self._loaded or errors != self._errors
                   or {f: p.version for f, p in live.items()}
                   != {f: p.version for f, p in self._live.items()})
        self._log(live, errors, states)
        self._scanned_ok = self._scanned_ok or not isinstance(scanned, str)
        self._states, self._live, self._errors, self._loaded = states, live, errors, True
        if changed:
            self._policies = PolicySet(live.values())
            for policy in live.values():
                key = (policy.name, policy.version)
                self._recent.pop(key, None)
                self._recent[key] = policy  # the newest last
            while len(self._recent) > RECENT_VERSIONS:
                del self._recent[next(iter(self._recent))]
        return changed

    def _log(self, live: Mapping[str, Policy], errors: Mapping[str, str],
             states: Mapping[str, FileState]) -> None:
        for file, policy in live.items():
            before = self._live.get(file)
            if before is None or before.version != policy.version:
                log.info("policy %r %s from %s (version %s)", policy.name,
                         "reloaded" if before else "loaded", file, policy.version)
        for file, before in self._live.items():
            if file not in live:
                log.warning("policy %r from %s is no longer served", before.name, file)
        for file, message in errors.items():
            if self._errors.get(file) == message:
                continue  # already reported: do not repeat it on every poll
            kept = live.get(file)
            st = states.get(file)
            if kept is None:
                tail = "no version of it is served"
            elif st is not None and kept is st.parsed:
                tail = f"policy {kept.name!r} is served as written"
            else:
                tail = f"the last good version ({kept.version}) of policy {kept.name!r} stays live"
            log.error("policy file problem; %s:\n%s", tail, message)
        for file in self._errors:
            if file not in errors:
                log.info("policy file %s: problem fixed", file)

    async def watch(self, interval: float = 1.0,
                    on_change: Callable[[], None] | None = None) -> None:
        """Call :meth:`poll` every ``interval`` seconds until cancelled: a change goes
        live one to two intervals after it was last written; ``on_change`` is then
        called (on the loop) once it is live."""
        while True:
            await asyncio.sleep(interval)
            try:
                changed = await asyncio.to_thread(self.poll)
                if changed and on_change is not None:
                    on_change()
            except Exception:  # keep watching: the next pass may succeed
                log.exception("policy reload failed; the current policies stay live")

    def status(self) -> tuple[bool, dict[str, Any]]:
        """(ready, detail) for ``/readyz``: ready once loaded with no file never loaded."""
        broken: dict[str, Any] = {}
        for file, message in self._errors.items():
            st = self._states.get(file)
            policy = self._live.get(file)
            broken[file] = {
                "error": message,
                "serving": policy.version if policy is not None else None,
                "serving_last_good": (policy is not None and st is not None
                                      and policy is not st.parsed),
            }
        directory = str(self.directory)
        ready = self._loaded and all(
            self._scanned_ok if f == directory else b["serving"] is not None
            for f, b in broken.items())
        return ready, {
            "directory": str(self.directory),
            "loaded": self._loaded,
            "policies": {p.name: {"file": f, "version": p.version, "mode": p.spec.mode,
                                  "default": p.spec.default}
                         for f, p in sorted(self._live.items())},
            "broken": broken,
            "pending": sorted(f for f, sig in self._pending.items() if sig != _GONE),
        }
