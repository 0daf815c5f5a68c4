"""`gateway eval --judge-url …`: the judge layers run end to end against a real judge
server (a scripted one here, under uvicorn), and the report counts their judge calls
and errors per layer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gateway.testing.judge import StructuredJudge
from gateway.testing.servers import ServerThread

CONTEXT = "The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall."
POLICY = """name: judged
layers:
  - name: nli
  - name: self-consistency
    config: {variations: 2}
"""


def test_eval_with_a_judge_runs_the_judge_layers(tmp_path: Path) -> None:
    rows = [{"id": f"t-{n}-{label}", "source": "toy", "context_input": CONTEXT,
             "question": "Tell me about the tower.", "model_output": answer, "label": label}
            for n, (label, answer) in enumerate([
                ("faithful", "The tower was completed in 1889 in Paris."),
                ("hallucinated", "The tower was completed in 1925 in Lyon.")])]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    policy = tmp_path / "judged.yaml"
    policy.write_text(POLICY)
    app = StructuredJudge(json_schema="reject")  # as llama-cpp-python
    with ServerThread(app) as judge:
        proc = subprocess.run(
            [sys.executable, "-m", "gateway", "eval", str(cases), "--policy", str(policy),
             "--json", "--judge-url", judge.url + "/v1", "--judge-model", "small-judge"],
            capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    layers = json.loads(proc.stdout)["overall"]["layers"]
    assert layers["nli"]["judge_calls_per_request"] == 1.0
    assert layers["self-consistency"]["judge_calls_per_request"] == 2.0
    assert layers["nli"]["error_rate"] == 0.0 == layers["self-consistency"]["error_rate"]
    assert layers["nli"]["judge_input_tokens_per_call_max"] == 100.0  # the server's usage
    models = {b["model"] for b in app.bodies}
    assert models == {"small-judge"}
    # json_schema refused once (the judge's own request), then json_object throughout.
    kinds = [b["response_format"]["type"] for b in app.bodies]
    assert kinds.count("json_schema") == 1 and set(kinds) == {"json_schema", "json_object"}
