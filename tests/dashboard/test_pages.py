"""The dashboard's pages over a real server (httpx): charts, breakdowns, candidates,
layers, the filtered list, a record with its trace link, and what is never shown."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest
from conftest import JAEGER, RECORDED_ANSWER, record

from gateway.testing.servers import ServerThread


def get(server: ServerThread, path: str, **params: str) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=True) as client:
        return client.get(path, params=params)


def svgs(html: str) -> list[ET.Element]:
    out, rest = [], html
    while "<svg" in rest:
        start = rest.index("<svg")
        end = rest.index("</svg>", start) + len("</svg>")
        out.append(ET.fromstring(rest[start:end]))  # well-formed XML
        rest = rest[end:]
    return out


def test_overview_draws_charts_breakdowns_candidates_and_layers(dashboard: ServerThread) -> None:
    r = get(dashboard, "/")
    assert r.status_code == 200, r.text
    assert "script-src" not in r.headers["content-security-policy"]  # no script at all
    assert "default-src 'none'" in r.headers["content-security-policy"]
    html = r.text
    assert "<script" not in html and "61 records" in html
    charts = [s for s in svgs(html) if s.get("class") == "chart"]
    assert len(charts) == 2
    ns = "{http://www.w3.org/2000/svg}"
    columns = charts[0].findall(f".//{ns}a")
    assert len(columns) == 6  # hours 08..13 UTC, each a link to its records
    tips = [c.find(f".//{ns}title").text for c in columns]  # type: ignore[union-attr]
    assert sum(int(part.rsplit(" ", 1)[1]) for tip in tips
               for part in tip.split(": ", 1)[1].split(", ")) == 61  # type: ignore[union-attr]
    assert "records?since=2026-11-24T08" in columns[0].get("href", "")
    for dim in ("policy", "model", "tenant"):
        assert f"<h2>By {dim}</h2>" in html
    assert "would have blocked 48 more, 0 fewer" in html  # live: 60 records, 12 blocked
    assert "live/judge" in html and "live/grounding" in html
    assert RECORDED_ANSWER not in html


def test_filters_narrow_every_section(dashboard: ServerThread) -> None:
    html = get(dashboard, "/", policy="recorded").text
    assert "1 records" in html and "live/judge" not in html
    assert get(dashboard, "/", tenant="-").text.count("20 records") == 1
    bad = get(dashboard, "/", since="last tuesday")
    assert bad.status_code == 400 and "not a time" in bad.text


def test_the_list_is_filtered_paged_and_links_to_records(dashboard: ServerThread) -> None:
    html = get(dashboard, "/records", verdict="fail").text
    assert html.count('href="/records/') == 12
    assert "(not applied)" in html and "grounding=0.200" in html
    page = get(dashboard, "/records").text
    assert "Records 1–61," in page and ">older<" not in page  # 100 per page: all on one
    later = get(dashboard, "/records", offset="50").text
    assert "Records 51–61," in later and "offset=0" in later and ">newer<" in later
    unverified = get(dashboard, "/records", verdict="none").text
    assert "shadow queue full" in unverified
    assert RECORDED_ANSWER not in get(dashboard, "/records").text


def test_a_record_shows_layers_candidates_and_its_trace(dashboard: ServerThread) -> None:
    rec = record(3, verdict="fail")
    full = rec["audit_id"]
    r = get(dashboard, f"/records/{full}")
    assert r.status_code == 200
    html = r.text
    assert f'href="{JAEGER}/trace/{rec["trace_id"]}"' in html
    assert "grounding: 1 of 3 claims unsupported" in html
    assert "Candidate strict" in html and "<td>len</td>" in html
    assert "does not record prompts or answers" in html
    prefix = get(dashboard, f"/records/{full[:10]}")
    assert prefix.status_code == 200 and full in prefix.text  # redirected to the full id
    assert get(dashboard, "/records/0000").status_code == 404
    assert get(dashboard, "/records/ffffffffff").status_code == 404


def test_content_only_where_the_policy_recorded_it(dashboard: ServerThread) -> None:
    html = get(dashboard, f"/records/{record(100)['audit_id']}").text
    assert RECORDED_ANSWER in html and "opts into recording content" in html


def test_values_are_escaped(tmp_path: Path) -> None:
    from gateway.dashboard.app import create_dashboard

    evil = record(1, policy="<img src=x onerror=alert(1)>")
    (tmp_path / "a.jsonl").write_text(__import__("json").dumps(evil) + "\n")
    app = create_dashboard(str(tmp_path / "a.jsonl"))
    with ServerThread(app) as server:
        for path in ("/", "/records", f"/records/{evil['audit_id']}"):
            html = get(server, path).text
            assert "<img" not in html and "&lt;img" in html, path
    app.state.store.close()


def test_a_missing_audit_is_a_page_not_a_crash(tmp_path: Path) -> None:
    from gateway.dashboard.app import create_dashboard

    app = create_dashboard(str(tmp_path / "none.jsonl"))
    with ServerThread(app) as server:
        r = get(server, "/")
        assert r.status_code == 404 and "No audit records yet" in r.text
        assert get(server, "/nothing").status_code == 404


@pytest.mark.parametrize("path", ["/static/style.css"])
def test_the_stylesheet_is_served_from_the_package(dashboard: ServerThread, path: str) -> None:
    r = get(dashboard, path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")


def test_gateway_audit_serve_serves_the_pages(audit_dir: Path) -> None:
    import subprocess
    import sys
    import time

    from gateway.testing.servers import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "audit", "serve", "--audit", str(audit_dir),
         "--port", str(port), "--jaeger-url", JAEGER],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert f"127.0.0.1:{port}" in proc.stdout.readline()  # printed before it binds
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert r.status_code == 200 and "61 records" in r.text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    bad = subprocess.run([sys.executable, "-m", "gateway", "audit", "serve", "--audit",
                          str(audit_dir / "missing")], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "no audit file or directory" in bad.stderr


def test_an_unreadable_file_is_an_error_page(tmp_path: Path) -> None:
    from gateway.dashboard.app import create_dashboard

    (tmp_path / "x.records.parquet").write_bytes(b"not parquet at all")
    app = create_dashboard(str(tmp_path))
    with ServerThread(app) as server:
        r = get(server, "/")
        assert r.status_code == 503 and "could not be read" in r.text
        assert "Traceback" not in r.text
    app.state.store.close()
