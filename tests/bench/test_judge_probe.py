"""``bench/judge_probe.py``: it recognises every judge call the layers make, its reply
schemas are ones the layers' parsers accept, and end to end against a real server
that behaves like llama-cpp-python's (``json_schema`` rejected with a 500,
``json_object`` + ``schema`` enforced, prose otherwise, ``n`` ignored) it finds the
working mode and reports parsed vs. failed layers per regime.

No model and no timings: the server answers each constrained call with the smallest
reply valid under the schema it was sent (a perfect constrained decoder).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.testing.servers import ServerThread

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


kinds = _load("judge_probe_kinds")
probe = _load("judge_probe")

CONTEXT = ("The Eiffel Tower is a wrought-iron tower in Paris, France. It is 330 metres tall "
           "and was completed in 1889. It was designed by the company of Gustave Eiffel, "
           "because Paris wanted a landmark for the 1889 World's Fair.")
CASES = [
    {"id": "t-1-faithful", "source": "halueval-qa", "label": "faithful",
     "context_input": CONTEXT, "question": "How tall is the Eiffel Tower, and when was it built?",
     "model_output": "The Eiffel Tower is 330 metres tall. It was completed in 1889, so it "
                     "was ready for the World's Fair."},
    {"id": "t-1-hallucinated", "source": "halueval-qa", "label": "hallucinated",
     "context_input": CONTEXT, "question": "How tall is the Eiffel Tower, and when was it built?",
     "model_output": "The Eiffel Tower is 450 metres tall. It was completed in 1925, so it "
                     "missed the World's Fair."},
]


async def _run_layers(judge: Any, regime: str = "today") -> list[Any]:
    out = []
    for name in probe.LAYERS:
        layer = probe.build_layer(name, regime, judge, {})
        out.append(await layer.verify(probe.verify_input(CASES[1], "m")))
    return out


@pytest.mark.parametrize("profile", ["full", "minimal"])
def test_layers_accept_replies_that_follow_each_schema(profile: str) -> None:
    """Every layer runs to a parsed result when each judge call is answered with the
    smallest reply its schema allows: the schemas are ones today's parsers read."""
    judge = probe.CaptureJudge(profile)
    results = asyncio.run(_run_layers(judge))
    assert [r.skipped for r in results] == [False] * len(probe.LAYERS)
    seen = [kinds.classify(m).kind for m in judge.prompts]
    assert set(seen) == set(kinds.KINDS) - {"fc-correct"}  # auto_correct is off by default


def test_every_judge_call_is_recognised_and_has_a_short_form() -> None:
    judge = probe.CaptureJudge()
    asyncio.run(_run_layers(judge))
    for messages in judge.prompts:
        call = kinds.classify(messages)
        if call.kind == "se-sample":
            assert kinds.schema_for(call) is None
            continue
        assert kinds.schema_for(call) is not None, call.kind
        short = kinds.short_messages(call, messages, CASES[1]["question"])
        assert short is not None, f"{call.kind}: the layer's prompt format changed"
        assert len(short[1]["content"]) < len(messages[-1]["content"]) + 400
        if call.kind in ("nli", "sc", "se-equiv", "fc-label"):
            assert call.count > 0, call.kind
        if call.kind in ("audit-facts", "audit-logic"):
            assert call.ids, call.kind


def test_validate_names_the_keyword_not_the_value() -> None:
    call = kinds.Call("nli", count=2)
    schema = kinds.schema_for(call, "full")
    good = {"results": [{"id": 1, "label": "neutral", "confidence": 0.5, "reason": "x"},
                        {"id": 2, "label": "entailment", "confidence": 1, "reason": "y"}]}
    assert kinds.validate(good, schema) == []
    bad = {"results": [{"id": 1, "label": "SECRET", "confidence": -0.9, "reason": "x"}]}
    problems = kinds.validate(bad, schema)
    assert "$.results: items count" in problems
    assert "$.results[].label: enum" in problems
    assert "$.results[].confidence: bounds" in problems
    assert not any("SECRET" in p for p in problems)


@pytest.mark.parametrize(("text", "value"), [
    ('{"a": 1}', {"a": 1}),
    ('Sure!\n```json\n{"a": [1, 2]}\n```\nDone.', {"a": [1, 2]}),
    ('The verdict is {"a": "}"} as asked; {"b": 2}', {"a": "}"}),
    ('noise { not json } then {"ok": true}', {"ok": True}),
])
def test_extract_json_is_lenient(text: str, value: Any) -> None:
    assert probe.extract_json(text) == value


@pytest.mark.parametrize("text", ["", "   ", "no json here", '{"cut": [1, 2'])
def test_extract_json_refuses_what_is_not_there(text: str) -> None:
    with pytest.raises(ValueError):
        probe.extract_json(text)


# -- end to end against a llama-cpp-python-like server -----------------------------------

async def _chat(request: Request) -> JSONResponse:
    body = await request.json()
    fmt = body.get("response_format")
    if fmt is not None and fmt.get("type") not in ("text", "json_object"):
        return JSONResponse({"error": {"message": "response_format: input should be 'text' or "
                                                  "'json_object'", "type": "internal_server_error",
                                       "param": None, "code": None}}, status_code=500)
    message: dict[str, Any] = {"role": "assistant"}
    if body.get("tool_choice") and body.get("tools"):
        args = kinds.instance(body["tools"][0]["function"]["parameters"])
        message["tool_calls"] = [{"id": "c", "type": "function", "function": {
            "name": "verdict", "arguments": json.dumps(args)}}]
        message["content"] = None
    elif fmt is not None and "schema" in fmt:
        last = body["messages"][-1]["content"]
        stubborn = request.url.path.startswith("/stubborn") and "results" in json.dumps(
            fmt["schema"]) and not last.startswith("Your reply could not be used")
        # /stubborn: the first answer to a numbered-items call leaves the items out
        message["content"] = ('{"results": []}' if stubborn
                              else json.dumps(kinds.instance(fmt["schema"])))
    elif fmt is not None:
        message["content"] = "{}"
    else:
        message["content"] = "I think the statements are mostly right."
    return JSONResponse({"id": "x", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 12, "completion_tokens": 7,
                                   "total_tokens": 19}})


@pytest.fixture(scope="module")
def llama_like() -> Iterator[str]:
    app = Starlette(routes=[Route("/v1/chat/completions", _chat, methods=["POST"]),
                            Route("/stubborn/v1/chat/completions", _chat, methods=["POST"])])
    with ServerThread(app) as srv:
        yield f"{srv.url}/v1"


def test_caps_finds_the_mode_the_server_enforces(llama_like: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(probe.amain(["caps", "--base-url", llama_like, "--model", "m"]))
    caps = json.loads(capsys.readouterr().out)
    assert caps["formats"]["json_schema"]["status"] == 500
    assert caps["formats"]["json_object+schema"]["enforced"] is True
    assert caps["n3_choices"] == 1
    assert probe.best_mode(caps) == "json_object+schema"


def test_parse_reports_failures_today_and_parses_with_a_schema(
        llama_like: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CASES), encoding="utf-8")
    out = tmp_path / "probe.jsonl"
    asyncio.run(probe.amain(["parse", "--base-url", llama_like, "--model", "m",
                             "--cases", str(cases), "--limit", "2", "--out", str(out),
                             "--regimes", "today,short,short-repair"]))
    table = capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    outcome = {(r["regime"], r["layer"], r["case"]): r["outcome"]
               for r in rows if r["type"] == "layer"}
    for case in ("t-1-faithful", "t-1-hallucinated"):
        assert outcome[("today", "nli", case)] == "error"  # prose: not JSON
        for regime in ("short", "short-repair"):
            assert {outcome[(regime, layer, case)] for layer in probe.LAYERS} == {"parsed"}
    calls = [r for r in rows if r["type"] == "call"]
    assert all(c["rewritten"] for c in calls
               if c["regime"] == "short" and c["kind"] != "se-sample")
    # `n` ignored: semantic-entropy's five samples took five requests (then cached)
    samples = [c for c in calls if c["kind"] == "se-sample"]
    assert len(samples) == 2 * 5 and {c["choices"] for c in samples} == {1}
    # a failed call is retried once in short-repair only, and the retry is recorded
    assert not any(c["repair"] for c in calls)
    assert "| nli | today | 2 | 0 | 2 | 0 | 0% |" in table
    assert "| nli | short | 2 | 2 | 0 | 0 | 100% |" in table


def test_short_repair_retries_once_quoting_the_problem_not_the_reply(
        llama_like: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(CASES[1]) + "\n", encoding="utf-8")
    out = tmp_path / "probe.jsonl"
    base = llama_like.replace("/v1", "/stubborn/v1")
    asyncio.run(probe.amain(["parse", "--base-url", base, "--model", "m", "--cases", str(cases),
                             "--limit", "1", "--out", str(out), "--layers", "nli",
                             "--regimes", "short,short-repair", "--record-text"]))
    capsys.readouterr()
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    outcome = {r["regime"]: r["outcome"] for r in rows if r["type"] == "layer"}
    assert outcome == {"short": "error", "short-repair": "parsed"}
    calls = [r for r in rows if r["type"] == "call" and r["regime"] == "short-repair"]
    assert [c["repair"] for c in calls] == [False, True]
    assert calls[0]["violations"] == ["items count"]
