"""``bench/grounding_flags.py`` puts each flagged answer in the bucket of the check that
flagged it, and counts faithful flagged against hallucinated caught per bucket."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTEXT = ("Riverside Rovers : `Team coached`: Anna Lindqvist. Riverside Rovers : `Division`: "
           "Northern League North. Riverside Rovers : `Stadium`: Millbrook Park")
CHAT = "[Human]: Do you follow the Riverside Rovers? [Human]: Who coaches them?"


def test_buckets_and_counts(tmp_path: Path) -> None:
    rows = [("1-faithful", "faithful", "Anna Lindqvist does. They play at Millbrook Park."),
            ("1-hallucinated", "hallucinated", "Anna Petersen coaches them."),
            ("2-faithful", "faithful", "Anna Petersen coaches them.")]  # labelled right
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps({
        "id": f"halueval-dialogue-{i}", "source": "halueval-dialogue", "context_input": CONTEXT,
        "question": CHAT, "model_output": answer, "label": label}) + "\n"
        for i, label, answer in rows))
    out = subprocess.run([sys.executable, str(REPO / "bench" / "grounding_flags.py"), str(path),
                          "--ids", "--list"], capture_output=True, text=True, check=True,
                         cwd=REPO, timeout=120).stdout
    assert "halueval-dialogue-1-hallucinated variant" in out
    assert "halueval-dialogue-2-faithful variant" in out
    assert "halueval-dialogue-1-faithful" not in out
    assert "in place of Anna Lindqvist" in out  # --list: the flagged faithful answer's reason
    table = {line.split()[0]: line.split() for line in out.splitlines()
             if line.split() and line.split()[0] in ("variant", "TOTAL", "scale")}
    assert table["variant"][1] == "1" and table["variant"][4] == "1"
    assert "scale" not in table
    assert table["TOTAL"][1] == "1" and table["TOTAL"][4] == "1"
