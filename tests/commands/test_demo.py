"""``gateway demo`` runs end to end in a subprocess, with no key and no network."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.commands.demo import SCENARIOS


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GATEWAY_", "OPENAI_"))}
    env.update(OPENAI_API_KEY="", NO_PROXY="*")
    return env


@dataclass(frozen=True)
class DemoRun:
    proc: subprocess.CompletedProcess[str]
    directory: Path
    audit: Path


@pytest.fixture(scope="module")
def default_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``gateway demo --audit …`` (the chat API), run once: two tests read its output."""
    directory = tmp_path_factory.mktemp("demo")
    audit = directory / "audit.jsonl"
    proc = subprocess.run([sys.executable, "-m", "gateway", "demo", "--audit", str(audit)],
                          capture_output=True, text=True, env=_env(), timeout=120,
                          cwd=directory)
    return DemoRun(proc, directory, audit)


def test_demo_runs_every_scenario(default_demo: DemoRun) -> None:
    proc, tmp_path, audit = default_demo.proc, default_demo.directory, default_demo.audit
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    blocks = out.split("\n[")[1:]
    assert len(blocks) == len(SCENARIOS) == 5
    for n, (scenario, block) in enumerate(zip(SCENARIOS, blocks), 1):
        assert block.startswith(f"{n}] {scenario.key}: "), block
        assert "    status   : 200" in block or "    status   : 4" in block
        assert "x-verity-" in block
        assert "    audit id : " in block
    assert f"written to {audit}" in out
    verdicts = {s.key: _header(b, "x-verity-verdict") for s, b in zip(SCENARIOS, blocks)}
    # The grounded answers pass (streamed too); the contradiction is blocked; the made-up
    # citation (its facts right) gets the disclaimer; with no context nothing contradicts.
    assert verdicts == {"grounded": "pass", "contradiction": "fail",
                        "fabricated-citation": "marginal", "streaming": "pass",
                        "no-context": "pass"}, out
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == [audit] or not audit.exists()


def _header(block: str, name: str) -> str:
    return next(line.split(": ", 1)[1] for line in block.splitlines()
                if line.strip().startswith(name + ":"))


def test_demo_without_policies_is_pass_through(tmp_path: Path) -> None:
    empty = tmp_path / "no-policies"
    empty.mkdir()
    proc = subprocess.run([sys.executable, "-m", "gateway", "demo", "--policies", str(empty)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.split("\n[")[1:]
    assert len(blocks) == len(SCENARIOS)
    for scenario, block in zip(SCENARIOS, blocks):
        assert f"    answer   : {scenario.reply}\n" in block
        assert "x-verity-*: none (no policy applied: pass-through)" in block


def test_demo_with_a_policy_it_cannot_select_shows_the_refusal(tmp_path: Path) -> None:
    # The shipped default policy does not allow header selection: every request is a
    # 403 from the gateway, not a pass-through answer.
    proc = subprocess.run([sys.executable, "-m", "gateway", "demo", "--policy", "default"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.split("\n[")[1:]
    assert len(blocks) == len(SCENARIOS)
    for block in blocks:
        assert "    status   : 403\n" in block, block
        assert ("    error    : policy 'default' may not be selected with the "
                "x-verity-policy header") in block, block
        assert "pass-through" not in block and "Error code" not in block, block
        assert "    x-verity-*: none (error response: nothing was verified)\n" in block


def test_demo_through_the_responses_api_gets_the_chat_verdicts(
        tmp_path: Path, default_demo: DemoRun) -> None:
    # The chat side is the default run (``--api chat`` is the default; its --audit file
    # changes no answer or header).
    def verdicts(api: str) -> list[list[str]]:
        proc = default_demo.proc if api == "chat" else subprocess.run(
            [sys.executable, "-m", "gateway", "demo", "--api", api],
            capture_output=True, text=True, env=_env(), timeout=120, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        blocks = proc.stdout.split("\n[")[1:]
        assert len(blocks) == len(SCENARIOS)
        return [[line for line in b.splitlines() if line.startswith((
            "    x-verity-verdict", "    x-verity-action", "    answer", "    status"))]
            for b in blocks]

    chat, responses = verdicts("chat"), verdicts("responses")
    assert responses == chat
    assert any("x-verity-verdict: fail" in line for block in chat for line in block)
