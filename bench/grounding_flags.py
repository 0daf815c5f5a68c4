"""Which check flags each answer: the precision of the grounding layer's discrete checks.

Runs the ``grounding`` layer of a policy (default ``policies/grounding.yaml``)
in-process over a case file (cases built as ``bench/eval_layers_offline.py`` builds
them) and puts every answer under the policy threshold into one bucket, by the
strongest reason it fell: a discrete check (a contradicted ``name`` — ``substituted``,
``variant`` or ``swapped`` —, ``date`` or ``value``; a ``negation`` flip; a ``premise``;
a ``comparison``), ``novelty`` (``question_novelty``: an answer adding nothing the
context holds to the question), ``correction`` (``corrections``: a dialogue reply
correcting the conversation with what the context lacks) or ``scale`` (unsupported
words only, no contradiction). Prints, per bucket, faithful answers flagged and
hallucinated answers caught: how often each check is right on rows nobody tuned on. ``--list`` prints every flagged faithful answer with
its reasons, to read.

    .venv/bin/python bench/grounding_flags.py data/halueval/halueval-diagnosis.jsonl
    .venv/bin/python bench/grounding_flags.py data/halueval/halueval-tuning.jsonl \\
        --source halueval-dialogue --list
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_layers_offline import verify_input  # noqa: E402

import gateway.layers._grounding_names as names_mod  # noqa: E402
from gateway.eval.cases import load_cases  # noqa: E402
from gateway.layers.base import LayerResources  # noqa: E402
from gateway.layers.grounding import GroundingConfig, GroundingLayer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ORDER = ("substituted", "variant", "swapped", "date", "value", "negation", "premise",
         "comparison", "other", "novelty", "choice", "correction", "scale")
NOVELTY = ("adds to the question only", "repeats the question", "denies what the question",
           "answers with a vague amount", "gives no year, where")
"""Reasons of ``question_novelty`` (``_grounding_novelty``) and ``vague_answers``
(``gateway.text.vague``): an unsupported answer with one of them is in the ``novelty``
bucket, not ``scale``."""
CHOICE = "but the context says it of"
"""The reason of ``choice_questions`` (``gateway.text.choice``): the ``choice`` bucket."""
CORRECTION = "corrects the conversation"
"""The reason of ``corrections`` (``_grounding_correction``): the ``correction`` bucket."""


def _policy_config(path: Path) -> dict[str, Any]:
    policy = yaml.safe_load(path.read_text(encoding="utf-8"))
    for layer in policy["layers"]:
        if layer["name"] == "grounding":
            return dict(layer.get("config") or {})
    raise SystemExit(f"{path}: no grounding layer")


async def run(args: argparse.Namespace) -> None:
    cfg = GroundingConfig(**_policy_config(args.policy))
    cases = load_cases(args.cases, args.source)
    variants: set[str] = set()
    real_variant = names_mod._variant

    def spy(*a: Any, **k: Any) -> str | None:
        got = real_variant(*a, **k)
        if got is not None:
            variants.add(" ".join(sorted(a[1])))
        return got

    rows: list[tuple[str, str, str, float]] = []
    detail: list[str] = []
    for case in cases:
        layer = GroundingLayer(cfg, LayerResources())  # no answer analysis shared across cases
        variants.clear()
        names_mod._variant = spy  # type: ignore[assignment]
        inp = verify_input(case)
        result = await layer.verify(inp)
        if result.passed:
            continue
        bucket = (_bucket(result, variants) if result.label == "contradicted"
                  else "novelty" if any(r in ev.reason for ev in result.evidence for r in NOVELTY)
                  else "choice" if any(CHOICE in ev.reason for ev in result.evidence)
                  else "correction" if any(CORRECTION in ev.reason for ev in result.evidence)
                  else "scale")
        rows.append((case.label, case.source, bucket, result.score))
        if args.ids:
            print(f"{case.id} {bucket} {result.score:.3f}")
        if args.list and case.label == "faithful":
            detail.append(f"--- {case.id} [{bucket}] score {result.score:.3f}\n"
                          f"  ANSWER: {case.answer[:300]}\n"
                          + "".join(f"  {ev.status}: {ev.reason[:300]}\n"
                                    for ev in result.evidence if ev.status != "supported"))
    n = Counter(c.label for c in cases)
    print(f"{args.cases.name} {args.source or 'all'}: {n['faithful']} faithful, "
          f"{n['hallucinated']} hallucinated")
    print(f"{'check':14s} {'faithful flagged':>18s} {'halluc. caught':>16s} {'precision':>10s}")
    for b in ORDER + ("TOTAL",):
        fl = sum(1 for r in rows if r[0] == "faithful" and (b == "TOTAL" or r[2] == b))
        ca = sum(1 for r in rows if r[0] == "hallucinated" and (b == "TOTAL" or r[2] == b))
        if fl or ca:
            prec = ca / (fl + ca)
            print(f"{b:14s} {fl:5d} ({fl / max(1, n['faithful']):6.1%})   "
                  f"{ca:5d} ({ca / max(1, n['hallucinated']):6.1%}) {prec:10.2f}")
    for d in detail:
        print(d)


def _bucket(result: Any, variants: set[str]) -> str:
    """The first of ``ORDER`` among the reasons of the contradicted sentences (read from
    the evidence's reason text; ``variants``: the names the variant check returned)."""
    order = {k: i for i, k in enumerate(ORDER)}
    found: list[str] = []
    for ev in result.evidence:
        if ev.status != "contradicted":
            continue
        for part in ev.reason.split("; "):
            if part.startswith("negation differs"):
                found.append("negation")
            elif " in place of " in part:
                name = part.split(" in place of ")[0]
                found.append("variant" if " ".join(sorted(name.lower().split())) in variants
                             or any(v and set(v.split()) <= set(name.lower().split())
                                    for v in variants) else "substituted")
            elif ": the context puts " in part or ": the context states " in part:
                found.append(_fact_kind(part))
            elif part.startswith(("values not", "entities not", "words not")):
                continue
            elif "born" in part or "first" in part or "earlier" in part:
                found.append("comparison")
            else:
                found.append("premise")
    if not found:
        return "other"
    return min(found, key=lambda k: order[k])


def _fact_kind(part: str) -> str:
    head = part.split(":")[0]
    if any(ch.isdigit() for ch in head):
        years = sum(c.isdigit() for c in head) == 4 or ": the context states" in part
        return "date" if years else "value"
    return "swapped"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path)
    ap.add_argument("--policy", type=Path, default=REPO / "policies" / "grounding.yaml")
    ap.add_argument("--source", help="only this source (e.g. halueval-dialogue)")
    ap.add_argument("--list", action="store_true", help="print each flagged faithful answer")
    ap.add_argument("--ids", action="store_true", help="print every flagged case's id first")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
