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
