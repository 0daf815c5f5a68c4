"""`gateway audit replay`: records written by a real gateway, re-verified under another
policy, compared with what was recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from gateway.app import create_app
from gateway.settings import load_settings
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread

pytest.importorskip("duckdb", reason="replay reads the audit with the 'audit' extra")

RECORDING = """
default: true
mode: shadow
telemetry: {record_content: true}
layers:
  - name: keyword
    config: {block: [forbidden]}
actions: {fail: {type: block}}
"""
SILENT = """
match: {metadata: {never: "x"}}
mode: shadow
layers:
  - name: keyword
    config: {block: [forbidden]}
"""
STRICTER = """
mode: inline
layers:
  - name: keyword
    config: {block: [forbidden, weather]}
actions: {fail: {type: block}}
"""


@pytest.fixture(scope="module")
def audits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("replay")
    out = {}
    for name, policy in (("recording", RECORDING), ("silent", SILENT.replace(
            'match: {metadata: {never: "x"}}\n', "default: true\n"))):
        pdir = tmp / f"policies-{name}"
        pdir.mkdir()
        (pdir / f"{name}.yaml").write_text(policy)
        audit = tmp / f"{name}.jsonl"
        up = ScriptedUpstream(rules=[], default_reply="a fine answer")
        with ServerThread(up) as u:
            settings = load_settings(environ={}, overrides={
                "upstreams": [{"name": "s", "base_url": u.url + "/v1"}],
                "policies_dir": str(pdir), "audit": {"path": str(audit)}})
            with ServerThread(create_app(settings)) as g:
                client = openai.OpenAI(base_url=g.url + "/v1", api_key="k", max_retries=0)
                for reply in ("the weather is nice", "forbidden words", "hello there"):
                    client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "tell me"}],
                        extra_headers={"x-mock-reply": reply})
                client.close()
        out[name] = audit
    (tmp / "stricter.yaml").write_text(STRICTER)
    out["policy"] = tmp / "stricter.yaml"
    return out


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "audit", *args],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "GATEWAY_AUDIT__PATH": "none.jsonl"})


def test_replay_reports_transitions_under_another_policy(audits: dict[str, Path]) -> None:
    before = audits["recording"].read_bytes()
    proc = _run("replay", "--audit", str(audits["recording"]), "--policy",
                str(audits["policy"]), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["policy"] == "stricter" and result["replayed"] == 3
    assert {(r["recorded"], r["replayed"]): r["count"] for r in result["verdicts"]} == \
        {("pass", "pass"): 1, ("fail", "fail"): 1, ("pass", "fail"): 1}
    assert (result["would_block_more"], result["would_block_fewer"]) == (1, 0)
    keyword = result["layers"]["keyword"]
    assert (keyword["runs"], keyword["fired"], keyword["recorded_fired"]) == (3, 2, 1)
    assert audits["recording"].read_bytes() == before  # nothing written

    text = _run("replay", "--audit", str(audits["recording"]), "--policy",
                str(audits["policy"]), "--verdict", "pass")
    assert text.returncode == 0, text.stderr
    assert "replayed 2 of 2 selected" in text.stdout
    assert "would have blocked 1 more, 0 fewer" in text.stdout


def test_records_without_content_say_why_nothing_replays(audits: dict[str, Path]) -> None:
    proc = _run("replay", "--audit", str(audits["silent"]), "--policy", str(audits["policy"]))
    assert proc.returncode == 1
    assert "none of the 3 record(s) selected holds content" in proc.stderr
    assert "record_content" in proc.stderr


def test_a_missing_or_broken_policy_is_a_clear_error(audits: dict[str, Path],
                                                     tmp_path: Path) -> None:
    missing = _run("replay", "--audit", str(audits["recording"]), "--policy",
                   str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no policy file" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("layers: [{name: no-such-layer}]\n")
    bad = _run("replay", "--audit", str(audits["recording"]), "--policy", str(broken))
    assert bad.returncode == 2 and "broken.yaml" in bad.stderr


def test_replay_in_processes_equals_replay_in_one(audits: dict[str, Path],
                                                  tmp_path: Path) -> None:
    """`--jobs 3` (three spawned processes, each every third record) prints what one
    process does: the same counts, and the changed records in the records' order."""
    lines = audits["recording"].read_text().splitlines()
    many = tmp_path / "many.jsonl"
    with many.open("w") as out:
        for i in range(200):  # enough that --jobs 3 really starts three processes
            record = json.loads(lines[i % len(lines)])
            record["audit_id"] = f"{i:08x}" + record["audit_id"][8:]
            record["started_at"] = f"2026-11-20T10:{i // 60:02d}:{i % 60:02d}+00:00"
            out.write(json.dumps(record) + "\n")
    before = many.read_bytes()
    runs = {jobs: _run("replay", "--audit", str(many), "--policy", str(audits["policy"]),
                       "--json", "--jobs", jobs) for jobs in ("1", "3")}
    for proc in runs.values():
        assert proc.returncode == 0, proc.stderr
    one, three = (json.loads(runs[j].stdout) for j in ("1", "3"))
    assert one["replayed"] == 200 and one["layers"]["keyword"]["recorded_runs"] == 200
    assert len(one["changed"]) == 20
    assert three == one
    assert many.read_bytes() == before
