"""`gateway audit tail|show|report` over a real audit file written by a running gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from gateway.app import create_app
from gateway.settings import load_settings
from gateway.testing.scripted import ScriptedUpstream
from gateway.testing.servers import ServerThread

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
    # An id prefix of 8+ characters is enough; a shorter one is a usage error.
    by_prefix = _run("show", "--audit", str(audit_file), audit_id[:8])
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert json.loads(by_prefix.stdout)["audit_id"] == audit_id
    assert _run("--file", str(audit_file), "show", "nope").returncode == 2
    missing = _run("--file", str(audit_file), "show", "00000000")
    assert missing.returncode == 1 and "no record" in missing.stderr


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = _run("--file", str(tmp_path / "none.jsonl"), "report")
    assert proc.returncode == 2 and "no audit file" in proc.stderr


def test_the_configured_path_is_named_absolute_with_its_key(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gateway", "audit", "report"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "GATEWAY_AUDIT__PATH": "rel/audit.jsonl"})
    assert proc.returncode == 2
    assert str(tmp_path / "rel" / "audit.jsonl") in proc.stderr
    assert "audit.path" in proc.stderr and "GATEWAY_AUDIT__PATH" in proc.stderr


def test_tail_refuses_a_negative_count(audit_file: Path) -> None:
    proc = _run("--file", str(audit_file), "tail", "-n", "-1")
    assert proc.returncode == 2 and "must be 0 or more" in proc.stderr


def test_filters_select_records(audit_file: Path) -> None:
    def count(*args: str) -> int:
        proc = _run("report", "--audit", str(audit_file), "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return int(json.loads(proc.stdout)["records"])

    assert count() == 2
    assert count("--verdict", "fail") == 1
    assert count("--verdict", "fail,pass") == 2
    assert count("--policy", "other") == 0
    assert count("--model", "m", "--tenant", "-") == 2  # no keys: no tenant
    assert count("--since", "1h") == 2 and count("--until", "2000-01-01") == 0
    bad = _run("report", "--audit", str(audit_file), "--since", "yesterday-ish")
    assert bad.returncode == 2 and "not a time" in bad.stderr


def test_a_directory_and_a_glob_read_like_the_file(audit_file: Path, tmp_path: Path) -> None:
    folder = tmp_path / "dir" / "date=2026-01-01"
    folder.mkdir(parents=True)
    (folder / "verity-h-1-x-00001.jsonl").write_bytes(audit_file.read_bytes())
    for spec in (str(tmp_path / "dir"), str(tmp_path / "dir" / "*" / "*.jsonl")):
        proc = _run("report", "--audit", spec, "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["records"] == 2
    nothing = _run("report", "--audit", str(tmp_path / "dir" / "*.parquet"))
    assert nothing.returncode == 2 and "no audit file matches" in nothing.stderr


def test_long_latencies_and_policy_names_keep_their_columns(tmp_path: Path) -> None:
    """Seen by a new user: `0 114428.22914428.229` once latencies passed 10 s, and
    tail's columns moved with a long policy name."""
    def record(i: int, policy: str, latency: float) -> dict[str, object]:
        return {"audit_id": f"{i:032x}", "policy": policy, "mode": "shadow", "model": "m",
                "started_at": f"2026-11-25T10:00:0{i}.000Z", "verdict": "pass",
                "score": 0.9, "action": "pass", "applied": False,
                "layers": [{"key": "judge", "name": "judge", "score": 0.9, "passed": True,
                            "latency_ms": latency}]}
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in (
        record(1, "p", 114428.229), record(2, "p", 14428.229),
        record(3, "a-policy-name-longer-than-any-column-width-of-the-tail", 5.0))))
    report = _run("report", "--audit", str(path))
    assert report.returncode == 0, report.stderr
    row = next(line for line in report.stdout.splitlines() if "p/judge" in line)
    assert {"14428.2", "114428.2"} <= set(row.split()), row  # p50 and p99, apart
    tail = _run("tail", "--audit", str(path))
    lines = tail.stdout.splitlines()
    assert len(lines) == 3 and len({line.index(" pass ") for line in lines}) == 1, lines
    assert len({line.index("[") for line in lines}) == 1, lines


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


def test_tail_follow_prints_records_appended_and_new_files(tmp_path: Path) -> None:
    import selectors
    import time

    folder = tmp_path / "date=2026-11-25"
    folder.mkdir()
    first = folder / "verity-h-1-s-00001.jsonl"
    first.write_text("")

    def line(i: int) -> bytes:
        return json.dumps({"audit_id": f"{i:032x}", "policy": "p", "mode": "shadow",
                           "started_at": "2026-11-25T10:00:00Z", "verdict": "pass",
                           "score": 1.0, "action": "pass", "layers": []}).encode() + b"\n"

    with subprocess.Popen(
            [sys.executable, "-m", "gateway", "audit", "tail", "--audit", str(tmp_path),
             "-f", "-n", "0", "--verdict", "pass"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        seen: list[bytes] = []
        deadline = time.monotonic() + 60  # a hang guard, not a measurement
        with first.open("ab") as fh:
            fh.write(line(1))
        wrote_second = False
        two = f"{2:032x}".encode()
        while not any(two in x for x in seen) and time.monotonic() < deadline:
            if seen and not wrote_second:  # a file that appears later is followed too
                (folder / "verity-h-1-s-00002.jsonl").write_bytes(line(2) + b'{"torn')
                wrote_second = True
            if sel.select(timeout=1):
                seen.append(proc.stdout.readline())
            elif not seen:
                with first.open("ab") as fh:  # until the follower has started, add more
                    fh.write(line(1))
        proc.terminate()
        proc.wait(timeout=30)
    assert seen and f"{1:032x}".encode() in seen[0], seen
    assert two in seen[-1] and len(seen[-1].splitlines()) == 1, seen


def test_a_gateway_writing_a_directory_is_read_back(tmp_path: Path) -> None:
    """audit.path not ending in .jsonl: the gateway writes per-process date= files,
    compacts what it closes, and the readers see every record."""
    pdir = tmp_path / "policies"
    pdir.mkdir()
    (pdir / "live.yaml").write_text(POLICY)
    (pdir / "strict.yaml").write_text(STRICT)
    audit = tmp_path / "audit"
    up = ScriptedUpstream(rules=[], default_reply="a fine answer")
    with ServerThread(up) as u:
        settings = load_settings(environ={}, overrides={
            "upstreams": [{"name": "s", "base_url": u.url + "/v1"}],
            "policies_dir": str(pdir),
            "audit": {"path": str(audit), "compact": True, "retention_days": 30}})
        with ServerThread(create_app(settings)) as g:
            client = openai.OpenAI(base_url=g.url + "/v1", api_key="k", max_retries=0)
            for text in ("hello", "say forbidden things", "more"):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": text}])
            client.close()
    files = sorted(p.relative_to(audit).as_posix() for p in audit.rglob("*.jsonl"))
    assert len(files) == 1 and files[0].startswith("date=") and "/verity-" in files[0]
    proc = _run("report", "--audit", str(audit), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["records"] == 3
