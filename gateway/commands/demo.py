"""``gateway demo``: a self-contained tour — scripted upstream, gateway, official SDK.

Starts the built-in scripted upstream (``gateway.testing.scripted``) and the gateway with
the shipped policies, each under uvicorn on a free loopback port, sends a handful
of requests through the ``openai`` SDK (``chat.completions.create``, or with
``--api responses`` ``responses.create``: the same verdicts) and prints, for each,
the answer, every ``x-verity-*`` response header and the audit id. No key, no
network.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SCENARIOS", "Scenario", "add_parser", "run"]

CONTEXT = ("<context>The Eiffel Tower in Paris is 330 metres tall. It was completed in 1889 "
           "and was designed by the engineering company of Gustave Eiffel.</context>")
DOCUMENTS = ("<document>The Eiffel Tower was completed in March 1889 for the World's Fair."
             "</document>\n<document>It is 330 metres tall and made of wrought iron.</document>")


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    question: str
    reply: str
    context: str = ""
    stream: bool = False
    metadata: dict[str, str] = field(default_factory=lambda: {"verity": "grounding"})

    def messages(self) -> list[dict[str, str]]:
        user = f"{self.context}\n\n{self.question}" if self.context else self.question
        return [{"role": "user", "content": user}]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("grounded", "grounded answer (matches its <context>)",
             "How tall is the Eiffel Tower and when was it completed?",
             "The Eiffel Tower is 330 metres tall and was completed in 1889.", CONTEXT),
    Scenario("contradiction", "answer contradicts its context (numbers and names)",
             "How tall is the Eiffel Tower and when was it completed?",
             "The Eiffel Tower is 450 metres tall, was completed in 1925 and was designed "
             "by Leonardo da Vinci.", CONTEXT),
    Scenario("fabricated-citation", "answer cites a source that is not in the request",
             "When was the Eiffel Tower completed?",
             "The Eiffel Tower was completed in 1889 [Source: Paris City Archives] and it "
             "is 330 metres tall [3].", DOCUMENTS),
    Scenario("streaming", "grounded answer, streamed",
             "How tall is the Eiffel Tower?",
             "The Eiffel Tower is 330 metres tall; it was completed in 1889.", CONTEXT,
             stream=True),
    Scenario("no-context", "no context to check against",
             "Tell me a fun fact about Paris.",
             "Paris has a single stop sign, in the 16th arrondissement."),
)


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo", help="run a self-contained demo (scripted upstream, no key, no network)",
        description="Start a scripted upstream and the gateway on loopback ports, send a few "
                    "requests through the openai SDK and show what the gateway did.")
    p.add_argument("--policies", metavar="DIR",
                   help="policies directory (default: the shipped policies)")
    p.add_argument("--policy", metavar="NAME",
                   help="ask for this policy with the x-verity-policy header (only a policy "
                        "that sets allow_header_selection: true; the gateway refuses any "
                        "other with 403, which the demo shows)")
    p.add_argument("--api", choices=("chat", "responses"), default="chat",
                   help="send the requests with chat.completions.create (default) or "
                        "responses.create (the Responses API, /v1/responses)")
    p.add_argument("--audit", metavar="FILE",
                   help="audit file to write (default: a temporary file, removed after)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="verity-demo-") as tmp:
        return _run(args, Path(tmp))


def _run(args: argparse.Namespace, tmp: Path) -> int:
    import openai  # a dev extra for now: imported here, only the demo needs it

    from gateway.app import create_app
    from gateway.settings import ConfigError, default_policies_dir, load_settings
    from gateway.testing.scripted import ScriptedUpstream
    from gateway.testing.servers import ServerThread

    policies = Path(args.policies) if args.policies else default_policies_dir()
    audit = Path(args.audit) if args.audit else tmp / "audit.jsonl"
    upstream = ScriptedUpstream(replies={s.key: s.reply for s in SCENARIOS},
                                default_reply="I have no scripted answer for that.")
    with ServerThread(upstream) as up:
        try:
            settings = load_settings(environ={}, overrides={
                "upstreams": [{"name": "scripted", "base_url": up.url + "/v1"}],
                "policies_dir": str(policies), "audit": {"path": str(audit)},
                "log_level": "warning"})
        except ConfigError as exc:
            print(f"gateway demo: {exc}", file=sys.stderr)
            return 2
        gateway = ServerThread(create_app(settings))
        with gateway:
            _intro(up.url, gateway.url, policies)
            with openai.OpenAI(base_url=gateway.url + "/v1", api_key="demo-no-key-needed",
                               max_retries=0, timeout=30) as client:
                for n, scenario in enumerate(SCENARIOS, 1):
                    send = _send_responses if args.api == "responses" else _send
                    _show(n, scenario, send(client, scenario, args.policy, openai))
    records = len(audit.read_text(encoding="utf-8").splitlines()) if audit.exists() else 0
    where = audit if args.audit else "a temporary file (use --audit FILE to keep it)"
    print(f"audit: {records} record(s) written to {where}")
    return 0


def _intro(upstream: str, gateway: str, policies: Path) -> None:
    print("Verity Gateway demo")
    print(f"  scripted upstream  {upstream}/v1")
    print(f"  gateway            {gateway}/v1")
    state = "" if policies.is_dir() else "  (missing: pure pass-through)"
    print(f"  policies           {policies}{state}")
    print()


@dataclass
class Result:
    status: int
    answer: str
    headers: dict[str, str]
    error: str | None = None


def _send(client: Any, s: Scenario, policy: str | None, openai: Any) -> Result:
    headers = {"x-scripted-reply-id": s.key}
    if policy:
        headers["x-verity-policy"] = policy
    kwargs: dict[str, Any] = {"model": "scripted-small", "messages": s.messages(),
                              "extra_headers": headers, "extra_body": {"metadata": s.metadata}}
    try:
        if s.stream:
            raw = client.chat.completions.with_raw_response.create(stream=True, **kwargs)
            parts: list[str] = []
            try:
                for chunk in raw.parse():
                    if chunk.choices:
                        parts.append(chunk.choices[0].delta.content or "")
            except openai.APIError as exc:  # an error event at the end of the stream
                return Result(raw.status_code, "".join(parts), _verity(raw.headers),
                              error=exc.message)
            return Result(raw.status_code, "".join(parts), _verity(raw.headers))
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        completion = raw.parse()
        answer = completion.choices[0].message.content or "" if completion.choices else ""
        return Result(raw.status_code, answer, _verity(raw.headers))
    except openai.APIStatusError as exc:
        return Result(exc.status_code, "", _verity(exc.response.headers),
                      error=_error_message(exc))


def _send_responses(client: Any, s: Scenario, policy: str | None, openai: Any) -> Result:
    """:func:`_send` through ``responses.create``: the answer is ``output_text`` (or a
    refusal: a block is a ``refusal`` part in the Responses API)."""
    headers = {"x-scripted-reply-id": s.key}
    if policy:
        headers["x-verity-policy"] = policy
    kwargs: dict[str, Any] = {"model": "scripted-small", "input": s.messages(),
                              "extra_headers": headers, "metadata": s.metadata}
    try:
        if s.stream:
            raw = client.responses.with_raw_response.create(stream=True, **kwargs)
            parts: list[str] = []
            try:
                for event in raw.parse():
                    if event.type in ("response.output_text.delta", "response.refusal.delta"):
                        parts.append(event.delta)
            except openai.APIError as exc:  # an error event at the end of the stream
                return Result(raw.status_code, "".join(parts), _verity(raw.headers),
                              error=exc.message)
            return Result(raw.status_code, "".join(parts), _verity(raw.headers))
        raw = client.responses.with_raw_response.create(**kwargs)
        response = raw.parse()
        refusals = [p.refusal for item in response.output if item.type == "message"
                    for p in item.content if p.type == "refusal"]
        return Result(raw.status_code, response.output_text or "".join(refusals),
                      _verity(raw.headers))
    except openai.APIStatusError as exc:
        return Result(exc.status_code, "", _verity(exc.response.headers),
                      error=_error_message(exc))


def _error_message(exc: Any) -> str:
    """The gateway's own error message (without the SDK's ``Error code: N -`` prefix,
    the status is printed on its own line)."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(exc.message)


def _verity(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-verity-")}


def _show(n: int, s: Scenario, r: Result) -> None:
    print(f"[{n}] {s.key}: {s.title}{' (stream)' if s.stream else ''}")
    print(f"    question : {s.question}{'  [with context]' if s.context else ''}")
    print(f"    status   : {r.status}")
    if r.answer:
        print("    answer   : " + textwrap.shorten(r.answer.replace("\n", " "), 150))
    if r.error:
        print("    error    : " + textwrap.shorten(r.error, 150))
    verity = {k: v for k, v in r.headers.items() if k != "x-verity-audit-id"}
    if verity:
        for name, value in sorted(verity.items()):
            print(f"    {name}: {textwrap.shorten(value, 120)}")
    elif r.status >= 400:  # refused before any policy ran (e.g. 403: not selectable)
        print("    x-verity-*: none (error response: nothing was verified)")
    else:
        print("    x-verity-*: none (no policy applied: pass-through)")
    print(f"    audit id : {r.headers.get('x-verity-audit-id', '-')}")
    print()
