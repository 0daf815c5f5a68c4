"""Every output of the ``grounding`` layer over the development sets, one JSON line per
case (score, label, evidence, failed claims, details), for checking that a change meant
to be behaviour-neutral (speed, refactoring) is: dump before and after, compare with
``cmp``.

    .venv/bin/python bench/dump_grounding.py . > after.jsonl
    .venv/bin/python bench/dump_grounding.py OTHER_CHECKOUT > before.jsonl
    cmp before.jsonl after.jsonl

Sets: tests/data/rag-dev.jsonl, tests/data/rag-extra.jsonl and
data/halueval/halueval-dev.jsonl (read from the checkout given; never the held-out
sample). Cases are built as ``bench/eval_layers_offline.py`` builds them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

FILES = ("tests/data/rag-dev.jsonl", "tests/data/rag-extra.jsonl",
         "data/halueval/halueval-dev.jsonl")


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(root / "bench"))
    from eval_layers_offline import verify_input

    from gateway.eval.cases import load_cases
    from gateway.layers.base import LayerResources
    from gateway.layers.grounding import GroundingConfig, GroundingLayer

    layer = GroundingLayer(GroundingConfig(), LayerResources())

    async def go() -> None:
        for name in FILES:
            for case in load_cases(root / name):
                result = await layer.verify(verify_input(case))
                print(json.dumps(dataclasses.asdict(result), sort_keys=True, default=repr))

    asyncio.run(go())


if __name__ == "__main__":
    main()
