"""``context.corpus_dir`` (QA): checked at load (file:line: key: message), relative to
the policy file, used exactly when ``corpus`` is in ``context.sources``, picked up
live when its files change, and resolved against the original file by ``gateway eval``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import openai
import pytest

from gateway.policy.loader import PolicyError, load_policy_file
from gateway.testing.scripted import Rule

if TYPE_CHECKING:  # tests/conftest.py (not importable by name next to tests/deploy)
    from conftest import GatewayFactory, ServedUpstream

FACT = "The Eiffel Tower was completed in 1889 in Paris."


def _policy(corpus: str | None, sources: str = "[system, blocks, tools, corpus]") -> str:
    lines = ["default: true", "mode: inline", "layers: [{name: citations}]",
             "actions: {fail: {type: block, message: blocked}}",
             "context:", f"  sources: {sources}"]
    if corpus is not None:
        lines.append(f"  corpus_dir: {corpus}")
    return "\n".join(lines) + "\n"


def _layout(tmp_path: Path, corpus: str | None = "../corpus",
            sources: str = "[system, blocks, tools, corpus]") -> Path:
    """policies/p.yaml and a sibling corpus/ with one source, ``eiffel``."""
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "corpus").mkdir(exist_ok=True)
    (tmp_path / "corpus" / "eiffel.txt").write_text(FACT + "\n", encoding="utf-8")
    path = tmp_path / "policies" / "p.yaml"
    path.write_text(_policy(corpus, sources), encoding="utf-8")
    return path


# ---- load time ---------------------------------------------------------------------------


def test_relative_corpus_dir_resolves_against_the_policy_file(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    path = _layout(tmp_path)
    monkeypatch.chdir(tmp_path / "corpus")  # the working directory plays no part
    assert load_policy_file(path).spec.context.corpus_dir == "../corpus"


def test_missing_corpus_dir_is_a_load_error_with_file_line_key(tmp_path: Path) -> None:
    path = _layout(tmp_path, corpus="../nope")
    with pytest.raises(PolicyError) as err:
        load_policy_file(path)
    text = str(err.value)
    assert text.startswith(f"{path}:7: context.corpus_dir: ")
    assert "not found" in text and "nope" in text


def test_corpus_dir_that_is_a_file_is_a_load_error(tmp_path: Path) -> None:
    path = _layout(tmp_path, corpus="../corpus/eiffel.txt")
    with pytest.raises(PolicyError, match=r"context\.corpus_dir: .*is not a directory"):
        load_policy_file(path)


def test_policy_check_reports_a_missing_corpus_dir(tmp_path: Path) -> None:
    path = _layout(tmp_path, corpus="../nope")
    proc = subprocess.run([sys.executable, "-m", "gateway", "policy", "check", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{path}:7: context.corpus_dir:" in proc.stdout + proc.stderr


def test_sources_and_corpus_dir_must_agree(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"context\.corpus_dir: .*`corpus` is not in"):
        load_policy_file(_layout(tmp_path, sources="[system]"))
    with pytest.raises(PolicyError, match=r"context\.sources: `corpus` is listed but"):
        load_policy_file(_layout(tmp_path, corpus=None))


# ---- served ------------------------------------------------------------------------------


def _ask(client: openai.OpenAI) -> str:
    raw = client.chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "When was it built?"}])
    return raw.headers["x-verity-verdict"]


def test_served_missing_corpus_dir_is_not_loaded(tmp_path: Path, make_gateway: GatewayFactory,
                                                 upstream: ServedUpstream,
                                                 make_client: Callable[..., openai.OpenAI]
                                                 ) -> None:
    path = _layout(tmp_path, corpus="../nope")
    gw = make_gateway(policies_dir=str(path.parent), reload_policies=False)
    upstream.app.rules = [Rule("built", "It was completed in 1889 in Paris [source: eiffel].")]
    raw = make_client(gw.base_url).chat.completions.with_raw_response.create(
        model="scripted-small", messages=[{"role": "user", "content": "When was it built?"}])
    assert "x-verity-policy" not in raw.headers  # refused at load, not blocking at request


def test_corpus_files_added_later_are_picked_up(tmp_path: Path, make_gateway: GatewayFactory,
                                                upstream: ServedUpstream,
                                                make_client: Callable[..., openai.OpenAI]
                                                ) -> None:
    path = _layout(tmp_path)
    gw = make_gateway(policies_dir=str(path.parent), reload_policies=False)
    client = make_client(gw.base_url)
    upstream.app.rules = [Rule("built", "It was completed in 1889 in Paris [source: eiffel].")]
    assert _ask(client) == "pass"
    upstream.app.rules = [Rule("built", "It opened in 1958 in Brussels [source: atomium].")]
    assert _ask(client) == "fail"  # no such source yet
    (tmp_path / "corpus" / "atomium.txt").write_text(
        "The Atomium opened in 1958 in Brussels.\n", encoding="utf-8")
    deadline = time.monotonic() + 10
    while _ask(client) != "pass":
        assert time.monotonic() < deadline, "the new corpus file was never picked up"
        time.sleep(0.2)


# ---- gateway eval ------------------------------------------------------------------------


def test_eval_resolves_a_relative_corpus_dir_against_the_policy_file(tmp_path: Path) -> None:
    path = _layout(tmp_path)
    rows = []
    for n, (good, bad) in enumerate([
            ("It was completed in 1889 [source: eiffel].",
             "It was completed in 1925 [source: eiffel]."),
            ("The tower was completed in 1889 in Paris [source: eiffel].",
             "The tower was completed in Lyon [source: eiffel].")]):
        for label, answer in (("faithful", good), ("hallucinated", bad)):
            rows.append({"id": f"c-{n}-{label}", "source": "toy", "context_input": "",
                         "question": "Tell me about the tower.", "model_output": answer,
                         "label": label})
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "gateway", "eval", str(cases),
                           "--policy", str(path), "--json"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path / "corpus")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["overall"]["auroc"] > 0.9, summary["overall"]
