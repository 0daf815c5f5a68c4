"""`gateway audit tail|show|report` over a real audit file written by a running gateway."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from gateway.app import create_app
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread
from gateway.settings import load_settings

POLICY = """
default: true
mode: shadow
candidates: [strict]
layers:
  - name: keyword
    config: {block: [forbidden]}
"""
STRICT = """
mode: inline
match: {metadata: {never: "x"}}
layers:
  - name: length
    config: {max_chars: 10}
"""


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("audit")
    pdir = tmp / "policies"
    pdir.mkdir()
    (pdir / "live.yaml").write_text(POLICY)
    (pdir / "strict.yaml").write_text(STRICT)
    audit = tmp / "audit.jsonl"
    up = ScriptedUpstream(rules=[], default_reply="a fine answer")
    with ServerThread(up) as u:
        settings = load_settings(environ={}, overrides={
            "upstreams": [{"name": "s", "base_url": u.url + "/v1"}],
            "policies_dir": str(pdir), "audit": {"path": str(audit)}})
        with ServerThread(create_app(settings)) as g:
            client = openai.OpenAI(base_url=g.url + "/v1", api_key="k", max_retries=0)
            for text in ("hello", "say forbidden things"):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": text}],
                    extra_headers={"x-mock-reply": f"reply about {text}"})
            client.close()
    return audit  # leaving the gateway drained the shadow queue into the file


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "audit", *args],
                          capture_output=True, text=True, timeout=60)


def test_report_counts_verdicts_layers_and_candidates(audit_file: Path) -> None:
    proc = _run("--file", str(audit_file), "report", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["records"] == 2
    verdicts = {row["verdict"]: row["count"] for row in summary["outcomes"]}
    assert verdicts == {"pass": 1, "fail": 1}
    assert summary["layers"]["live/keyword"]["failed"] == 1
    (cand,) = summary["candidates"]
    assert cand["candidate"] == "strict" and cand["evaluated"] == 2
    # Both replies are longer than 10 chars: the strict candidate passes neither, so it
    # disagrees with the live verdict at least on the answer the live policy passed.
    assert "pass" not in cand["verdicts"] and sum(cand["verdicts"].values()) == 2
    assert cand["verdict_differs"] >= 1


def test_tail_and_show(audit_file: Path) -> None:
    proc = _run("--file", str(audit_file), "tail", "-n", "5", "--verdict", "fail")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and "live/shadow" in lines[0] and "(not applied)" in lines[0]
    audit_id = lines[0].split()[1]
    shown = _run("--file", str(audit_file), "show", audit_id)
    assert shown.returncode == 0
    assert json.loads(shown.stdout)["audit_id"] == audit_id
    assert _run("--file", str(audit_file), "show", "nope").returncode == 1


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = _run("--file", str(tmp_path / "none.jsonl"), "report")
    assert proc.returncode == 2 and "no audit file" in proc.stderr


@pytest.fixture(scope="module")
def unverified_audit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One verified record and one the gateway wrote for an upstream it could not reach
    (``verdict``/``action`` null, ``note: not verified: upstream_connect_error``)."""
    from gateway.testing.servers import free_port

    tmp = tmp_path_factory.mktemp("unverified")
    pdir = tmp / "policies"
    pdir.mkdir()
    (pdir / "live.yaml").write_text(POLICY)
    (pdir / "strict.yaml").write_text(STRICT)
    audit = tmp / "audit.jsonl"
    up = ScriptedUpstream(rules=[], default_reply="a fine answer")
    with ServerThread(up) as u:
        settings = load_settings(environ={}, overrides={
            "upstreams": [{"name": "s", "base_url": u.url + "/v1", "models": ["m"]},
                          {"name": "down", "base_url": f"http://127.0.0.1:{free_port()}/v1"}],
            "policies_dir": str(pdir), "audit": {"path": str(audit)}})
        with ServerThread(create_app(settings)) as g:
            client = openai.OpenAI(base_url=g.url + "/v1", api_key="k", max_retries=0)
            client.chat.completions.create(model="m",
                                           messages=[{"role": "user", "content": "hello"}])
            with pytest.raises(openai.APIStatusError):
                client.chat.completions.create(
                    model="unreachable", messages=[{"role": "user", "content": "hello"}])
            client.close()
    return audit


def test_report_json_has_null_for_an_unverified_record(unverified_audit: Path) -> None:
    proc = _run("--file", str(unverified_audit), "report", "--json")
    assert proc.returncode == 0, proc.stderr
    outcomes = json.loads(proc.stdout)["outcomes"]
    assert [(row["verdict"], row["action"]) for row in outcomes] == \
        [("pass", "pass"), (None, None)]  # JSON null, listed after the verdicts
    text = _run("--file", str(unverified_audit), "report")
    assert text.returncode == 0, text.stderr
    assert "None" not in text.stdout and "not verified" in text.stdout


def test_tail_says_not_verified_and_keeps_columns(unverified_audit: Path) -> None:
    proc = _run("--file", str(unverified_audit), "tail")
    assert proc.returncode == 0, proc.stderr
    verified, unverified = proc.stdout.rstrip("\n").splitlines()
    assert "None" not in unverified and "not applied" not in unverified
    assert "not verified" in unverified and "upstream_connect_error" in unverified
    assert verified.split()[1] != unverified.split()[1]  # the audit id stays field 1
    # The verdict column starts at the same offset on both lines, and so do the layers.
    assert verified.index(" pass ") == unverified.index(" not verified ")
    assert verified.index("[") == unverified.index("[")


def test_a_reader_that_leaves_early_gets_no_traceback(audit_file: Path, tmp_path: Path) -> None:
    """`gateway audit tail -n 20000 | head -1`: the pipe closes under the writer."""
    big = tmp_path / "big.jsonl"
    big.write_text(audit_file.read_text() * 10_000)  # far more than a pipe buffers
    with subprocess.Popen(
        [sys.executable, "-m", "gateway", "audit", "--file", str(big), "tail", "-n", "20000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()  # one line, then leave
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err
