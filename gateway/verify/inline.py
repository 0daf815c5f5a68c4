import re, sys
p=sys.argv[1]
s=open(p).read()
def rep(old,new):
    global s
    assert s.count(old)==1, old
    s=s.replace(old,new)
rep('''A client that disconnects cancels verification (the proxy's disconnect watcher);
nothing is audited then.
''','''A client that disconnects cancels verification (the proxy's disconnect watcher); the
record says so (``note: "not verified: client disconnected …"``: before the response
was sent, or after how many characters of a passthrough answer;
``VerityEngine._client_gone``).
''')
rep('''    budget = Budget.for_policy(policy)
    spec = policy.spec
''','''    budget = Budget.for_policy(policy)
    spec = policy.spec
    outcome.response_id = completion.get("id")  # the delivered answer's, once acted on
    engine.track(x, outcome)  # a client that disconnects from here on gets this record
    calls: list[str | None] = []  # each regenerate call's response id
''')
rep('''        model = str(payload.get("model") or x.info.model)
        t0 = time.monotonic()
        try:
            target = x if model == x.info.model else dataclasses.replace(
                x, upstream=proxy.route(model))
            return await proxy.complete(target, payload)
        finally:  # upstream time is not verification time (budget.total_ms)
            budget.exclude(time.monotonic() - t0)
''','''        model = str(payload.get("model") or x.info.model)
        calls.append(None)
        outcome.attempts = len(calls)  # the attempt running, should the client disconnect
        t0 = time.monotonic()
        try:
            target = x if model == x.info.model else dataclasses.replace(
                x, upstream=proxy.route(model))
            status, parsed, raw = await proxy.complete(target, payload)
        finally:  # upstream time is not verification time (budget.total_ms)
            budget.exclude(time.monotonic() - t0)
        calls[-1] = parsed.get("id") if isinstance(parsed, dict) else None
        return status, parsed, raw
''')
rep('''    outcome.response_id = completion.get("id")
    delivered = applied.completion or completion
''','''    delivered = applied.completion or completion
    # The id the client got (a regenerated answer's); each attempt's in attempt_history
    # (entry 0 is the answer first verified, then one per regenerate call).
    outcome.response_id = delivered.get("id")
    if calls and len(applied.history) == len(calls) + 1:
        for entry, rid in zip(applied.history, [completion.get("id"), *calls], strict=True):
            entry["response_id"] = rid
''')
m = re.findall(r"\n( +)hold = HoldBack\(x\)\n", s)
assert len(m)==1
ind=m[0]
rep(f"\n{ind}hold = HoldBack(x)\n", f"\n{ind}hold = HoldBack(x)\n{ind}engine.track(x, outcome, _sent(hold))\n")
rep('''# ---- non-stream ---------------------------------------------------------------------------
''','''def _sent(hold: HoldBack) -> Callable[[], tuple[str, str | None]]:
    """A passthrough stream cut by its client: how much (unverified) answer it was sent."""
    def progress() -> tuple[str, str | None]:
        n = len(answer_text(hold.completion()))
        return f"after {n} characters of the answer were sent", hold.acc.id
    return progress


# ---- non-stream ---------------------------------------------------------------------------
''')
rep('''import time
from typing import TYPE_CHECKING, Any
''','''import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
''')
open(p,'w').write(s)
