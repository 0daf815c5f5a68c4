"""`gateway eval` end to end: a real gateway, a scripted upstream, the SDK, --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONTEXT = ("The Eiffel Tower was completed in 1889 in Paris. It is 330 metres tall "
           "and was designed by the company of Gustave Eiffel.")


def _cases(tmp_path: Path) -> Path:
    rows = []
    faithful = ["It was completed in 1889.", "The tower is 330 metres tall.",
                "Gustave Eiffel's company designed it.", "It stands in Paris."]
    hallucinated = ["It was completed in 1925 in Lyon.", "The tower is 120 metres tall.",
                    "Le Corbusier designed it in 1950.", "It stands in Berlin since 1889."]
    for n, (good, bad) in enumerate(zip(faithful, hallucinated)):
        for label, answer in (("faithful", good), ("hallucinated", bad)):
            rows.append({"id": f"t-{n}-{label}", "source": "toy-qa" if n % 2 else "toy-sum",
                         "context_input": CONTEXT, "question": "Tell me about the tower.",
                         "model_output": answer, "label": label})
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "eval", *args],
                          capture_output=True, text=True, timeout=180)


def test_eval_json_summary_has_the_promised_shape(tmp_path: Path) -> None:
    proc = _run(str(_cases(tmp_path)), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert summary["cases"] == 8
    assert summary["policy"] == "grounding"
    for block in (summary["overall"], *summary["per_source"].values()):
        assert 0.0 <= block["auroc"] <= 1.0
        assert 0.0 <= block["recall_at_5pct_fpr"] <= 1.0
        assert "length_baseline" in block
    assert set(summary["per_source"]) == {"toy-qa", "toy-sum"}
    # Contradicted numbers, places and names are what grounding exists to catch.
    assert summary["overall"]["auroc"] >= 0.9
    grounding = summary["overall"]["layers"]["grounding"]
    assert grounding["latency_ms_p50"] is not None
    assert "cases" in proc.stderr  # the progress bar went to stderr, not stdout


def test_eval_text_report_and_bad_input(tmp_path: Path) -> None:
    proc = _run(str(_cases(tmp_path)), "--limit", "4")
    assert proc.returncode == 0, proc.stderr
    assert "length" in proc.stdout and "overall" in proc.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    proc = _run(str(bad))
    assert proc.returncode == 2
    assert "bad.jsonl:1" in proc.stderr


@pytest.mark.parametrize("policy_text, message", [("layers: []\n", "layers")])
def test_eval_rejects_a_broken_policy(tmp_path: Path, policy_text: str, message: str) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(policy_text)
    proc = _run(str(_cases(tmp_path)), "--policy", str(policy))
    assert proc.returncode == 2
    assert "p.yaml" in proc.stderr and message in proc.stderr


def test_credit_score_cases_get_a_zone_confusion_matrix(tmp_path: Path) -> None:
    rows = [
        {"id": 1, "tag": "clean", "context_input": CONTEXT,
         "model_output": "The tower was completed in 1889 in Paris.", "expected_credit_score": 5},
        {"id": 2, "tag": "major_factual", "context_input": CONTEXT,
         "model_output": "The tower was completed in 1925 in Lyon.", "expected_credit_score": 2},
        {"id": 3, "tag": "severe_fabrication", "context_input": CONTEXT,
         "model_output": "Le Corbusier built it in Berlin in 1950, 900 metres tall.",
         "expected_credit_score": 1},
    ]
    path = tmp_path / "credit.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    proc = _run(str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    zones = summary["overall"]["zones"]
    assert zones["n"] == 3
    assert sum(sum(row.values()) for row in zones["matrix"].values()) == 3
    assert sum(zones["matrix"]["BAD"].values()) == 2 and sum(zones["matrix"]["GOOD"].values()) == 1
    assert set(summary["per_source"]) == {"clean", "major_factual", "severe_fabrication"}
    assert 0.0 <= zones["cross_band_rate"] <= 1.0


def test_cases_without_context_are_scored_not_errors(tmp_path: Path) -> None:
    rows = [{"id": f"n-{label}", "source": "chat", "context_input": "", "question": "Hi!",
             "model_output": answer, "label": label}
            for label, answer in (("faithful", "Hello there."),
                                  ("hallucinated", "Paris has 90 million people."))]
    path = tmp_path / "nocontext.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    proc = _run(str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["overall"]["scored"] == 2 and summary["errors"] == []


@pytest.mark.parametrize("option", ["--limit", "--concurrency"])
@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_eval_rejects_a_count_that_is_not_positive(tmp_path: Path, option: str,
                                                   value: str) -> None:
    # --limit 0 used to run every case and --limit -3 to drop the last three;
    # --concurrency 0 waited forever.
    proc = _run(str(_cases(tmp_path)), option, value)
    assert proc.returncode == 2
    assert f"argument {option}: expected a positive integer, got {value!r}" in proc.stderr
    assert proc.stdout == ""


def test_eval_help_shows_a_single_percent_sign() -> None:
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # argparse wraps lines
    assert "<=5% false flags" in text and "%%" not in text
