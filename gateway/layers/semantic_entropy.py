"""``semantic-entropy`` layer: is the model unsure of its answer? (seed 000 layer 1,
done as in Farquhar et al., *Nature* 2024, "discrete" semantic entropy)

1. **Sample** ``samples`` answers to the original question — the request's own
   messages — at ``temperature`` > 0, in one judge call with ``n = samples`` (a
   server that ignores ``n`` is asked again by the judge until it has them all).
2. **Cluster** the samples *and the answer under test* by meaning, greedily: each
   text joins the first cluster whose first member it is equivalent to, else starts
   a new one. Equivalence is ``clustering: entailment`` (default) — bidirectional
   entailment decided by the judge for every pair of distinct texts in one batched
   call — or ``lexical``: normalised content-word sets (question words removed)
   with Jaccard similarity ``≥ jaccard_threshold``; no model call, blind to
   paraphrase. Texts equal after normalisation are equivalent without asking.
3. **Entropy** over the samples' cluster sizes ``p_k = |C_k| / N``:
   ``H = −Σ p_k ln p_k``, reported normalised, ``H / ln N`` ∈ [0, 1] (0: every
   sample means the same; 1: all differ). For N = 5: 5 → 0.00, 4+1 → 0.31,
   3+2 → 0.42, 3+1+1 → 0.59, 2+2+1 → 0.66, 2+1+1+1 → 0.83, all distinct → 1.00.
4. **The answer** must fall in the largest cluster: ``agreement`` = samples in the
   answer's cluster / samples in the largest one (0 when no sample means what the
   answer says).

``score = (1 − H_norm) × agreement``. ``passed`` iff ``H_norm < threshold``
(default 0.3 — the seed's threshold, here on the normalised scale; with five
samples a single dissenting sample already fails, as it does on the seed's
"1 − mean pairwise similarity" scale) and, with ``require_majority`` (default),
the answer is in a largest cluster. ``failed_claims`` are the answer's first
checkable sentences when it fails. A request with no user turn (no question to
sample again): skipped, 0.5 — before the judge is needed, so that case is skipped
with no judge too.

Judge calls per request: 1 sampling call (``n`` = samples) + 1 clustering call
with ``entailment`` when the texts are not all identical. Samples are at
temperature > 0, so they are never cached. The samples come from the judge model
(the request's model unless ``judge.model`` names another): with a different judge
this measures *the judge's* uncertainty about the question.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from gateway.layers._judged import (
    JudgeTally,
    ReplySchema,
    answer_claims,
    numbered_items,
    numbered_schema,
    require_judge,
    yes_no,
)
from gateway.layers.base import (
    Evidence,
    JudgeError,
    LayerConfig,
    LayerResources,
    LayerResult,
    VerifyInput,
)
from gateway.sources.context import message_text
from gateway.text.tokens import content_words, tokenize

__all__ = ["SemanticEntropyConfig", "SemanticEntropyLayer", "cluster", "equivalence_prompt",
           "normalised_entropy", "reply_schema"]

SYSTEM = "You compare answers by meaning and answer with strict JSON only."
_YES = {"true", "yes", "equivalent", "same"}
_NO = {"false", "no", "different", "not equivalent"}


class SemanticEntropyConfig(LayerConfig):
    """Typed config of the ``semantic-entropy`` layer (unknown keys are errors)."""

    samples: int = Field(5, ge=2, le=10)
    """Answers sampled to the original question (N)."""
    temperature: float = Field(1.0, gt=0.0, le=2.0)
    """Sampling temperature. An Anthropic judge (``judge.kind: anthropic``) is sent at
    most 1.0, the Messages API's limit: above 1 means 1 there."""
    clustering: Literal["entailment", "lexical"] = "entailment"
    jaccard_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """``lexical``: content-word Jaccard at which two answers mean the same."""
    threshold: float = Field(0.3, ge=0.0, le=1.0)
    """``passed`` needs normalised entropy below this."""
    require_majority: bool = True
    """``passed`` also needs the answer under test in a largest cluster."""
    sample_tokens: int = Field(256, ge=16)
    """Reply budget of each sampled answer."""
    max_answer_chars: int = Field(1500, ge=100)
    """Each answer is cut to this in the clustering prompt."""
    max_tokens: int = Field(1024, ge=64)
    """Reply budget of the clustering call."""


def normalised_entropy(sizes: Sequence[int]) -> float:
    """``−Σ p ln p / ln N`` over cluster sizes (N = their sum; 0 when N < 2)."""
    n = sum(sizes)
    if n < 2:
        return 0.0
    h = -sum(s / n * math.log(s / n) for s in sizes if s)
    return max(0.0, min(1.0, h / math.log(n)))


def cluster(count: int, same: Any) -> list[list[int]]:
    """Greedy clustering of items ``0..count-1``: each joins the first cluster whose
    first member ``same(member, item)`` holds for, else starts one (Farquhar et al.)."""
    clusters: list[list[int]] = []
    for i in range(count):
        for c in clusters:
            if same(c[0], i):
                c.append(i)
                break
        else:
            clusters.append([i])
    return clusters


def equivalence_prompt(question: str, answers: Sequence[str],
                       pairs: Sequence[tuple[int, int]]) -> list[dict[str, str]]:
    """One batched bidirectional-entailment prompt over numbered answer pairs."""
    listed = "\n".join(f"A{i}. {a}" for i, a in enumerate(answers, 1))
    asked = "\n".join(f"{n}. A{a + 1} and A{b + 1}" for n, (a, b) in enumerate(pairs, 1))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": (
        f"Question: {question}\n\nAnswers:\n{listed}\n\n"
        "For each numbered pair below, decide whether the two answers are equivalent "
        "as answers to the question: each entails the other (bidirectional entailment), "
        "stating the same facts, possibly in different words. A different or "
        "contradicting fact, or a claim only one of them makes, means not equivalent.\n"
        f"Pairs:\n{asked}\n\n"
        "Answer with strict JSON only, one result per pair, no prose:\n"
        '{"results": [{"id": 1, "equivalent": true | false}]}')}]


def reply_schema(pairs: int) -> ReplySchema:
    """The reply :func:`equivalence_prompt` asks for, over ``pairs`` pairs."""
    return numbered_schema("equivalences", pairs, {"equivalent": {"type": "boolean"}})


class SemanticEntropyLayer:
    """Sample the question again; cluster by meaning; entropy + majority check."""

    name: ClassVar[str] = "semantic-entropy"
    Config: ClassVar[type[LayerConfig]] = SemanticEntropyConfig

    def __init__(self, config: SemanticEntropyConfig,
                 resources: LayerResources | None = None) -> None:
        self.config = config
        self.resources = resources or LayerResources()

    async def verify(self, inp: VerifyInput) -> LayerResult:
        cfg = self.config
        messages = _sampling_messages(inp.messages)
        if not any(m["role"] == "user" for m in messages):
            return LayerResult(score=0.5, passed=True, skipped=True, label="skipped",
                               explanation="nothing to check: the request has no question")
        # Only now is the judge needed: nothing to check is skipped with or without one.
        tally = JudgeTally(require_judge(self.resources), inp.model)
        reply = await tally.ask(messages, temperature=cfg.temperature,
                                max_tokens=cfg.sample_tokens, n=cfg.samples)
        samples = [t.strip() for t in reply.texts[:cfg.samples]]
        if len(samples) < 2:
            raise JudgeError(f"judge returned {len(samples)} samples, need at least 2")
        texts = [inp.response_text.strip(), *samples]
        same = (await self._entailment(tally, inp.question, texts)
                if cfg.clustering == "entailment" else _lexical(texts, inp.question,
                                                                cfg.jaccard_threshold))
        clusters = cluster(len(texts), same)
        return tally.account(self._result(inp, texts, clusters))

    async def _entailment(self, tally: JudgeTally, question: str, texts: list[str]) -> Any:
        keys = [_norm(t) for t in texts]
        unique = list(dict.fromkeys(keys))
        if len(unique) == 1:
            return lambda a, b: True
        shown = [texts[keys.index(k)][:self.config.max_answer_chars] for k in unique]
        pairs = [(a, b) for a in range(len(unique)) for b in range(a + 1, len(unique))]

        def read(data: Any) -> set[tuple[int, int]]:
            items = numbered_items(data, len(pairs))
            return {p for n, p in enumerate(pairs, 1) if _equivalent(items[n], n)}

        equal = await tally.ask_parsed(equivalence_prompt(question[:2000], shown, pairs), read,
                                       schema=reply_schema(len(pairs)),
                                       max_tokens=self.config.max_tokens)
        slot = {k: i for i, k in enumerate(unique)}

        def same(a: int, b: int) -> bool:
            x, y = sorted((slot[keys[a]], slot[keys[b]]))
            return x == y or (x, y) in equal
        return same

    def _result(self, inp: VerifyInput, texts: list[str],
                clusters: list[list[int]]) -> LayerResult:
        cfg = self.config
        n = len(texts) - 1
        sizes = [sum(1 for i in c if i > 0) for c in clusters]
        h = normalised_entropy([s for s in sizes if s])
        largest = max(sizes)
        mine = next(k for k, c in enumerate(clusters) if 0 in c)
        agreement = sizes[mine] / largest if largest else 0.0
        in_largest = sizes[mine] == largest and largest > 0
        score = (1.0 - h) * agreement
        certain = h < cfg.threshold
        passed = certain and (in_largest or not cfg.require_majority)
        label = ("consistent" if passed else "uncertain" if not certain else "minority")
        failed = [] if passed else (answer_claims(inp.response_text, 3)
                                    or [inp.response_text.strip()[:300]])
        evidence = [Evidence(text=texts[0][:300],
                             status="majority" if in_largest else "minority",
                             score=round(sizes[mine] / n, 4),
                             reason=f"{sizes[mine]}/{n} samples mean the same as the answer")]
        evidence += [Evidence(text=texts[c[0] if c[0] > 0 else c[1]][:300],
                              status="majority" if s == largest else "minority",
                              score=round(s / n, 4), reason=f"cluster of {s}/{n} samples")
                     for c, s in zip(clusters, sizes, strict=True) if s]
        why = (f"{n} samples in {sum(1 for s in sizes if s)} meaning clusters "
               f"(normalised entropy {h:.2f}, threshold {cfg.threshold}); "
               f"the answer agrees with {sizes[mine]}/{n} samples"
               + ("" if in_largest else " — not the majority meaning"))
        return LayerResult(
            score=min(1.0, max(0.0, score)), passed=passed, label=label, explanation=why,
            evidence=evidence, failed_claims=failed,
            details={"entropy": h, "samples": n, "clusters": sizes, "answer_cluster": mine,
                     "answer_in_largest": in_largest, "agreement": agreement,
                     "clustering": cfg.clustering,
                     "sample_texts": [t[:300] for t in texts[1:]]})


def _sampling_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The request's conversation as plain text turns (tool results as user turns)."""
    out: list[dict[str, str]] = []
    for m in messages:
        role, text = str(m.get("role", "")), message_text(m)
        if not text:
            continue
        if role in ("system", "developer"):
            out.append({"role": "system", "content": text})
        elif role in ("user", "assistant"):
            out.append({"role": role, "content": text})
        elif role == "tool":
            out.append({"role": "user", "content": f"Tool result:\n{text}"})
    return out


def _norm(text: str) -> str:
    return " ".join(tokenize(text))


def _lexical(texts: list[str], question: str, bar: float) -> Any:
    asked = content_words(tokenize(question))
    sets = []
    for t in texts:
        words = content_words(tokenize(t))
        sets.append(words - asked or words)

    def same(a: int, b: int) -> bool:
        x, y = sets[a], sets[b]
        if not x and not y:
            return _norm(texts[a]) == _norm(texts[b])
        return len(x & y) / len(x | y) >= bar
    return same


def _equivalent(item: Mapping[str, Any], n: int) -> bool:
    return yes_no(item.get("equivalent", item.get("same")), _YES, _NO,
                  f"'equivalent' for pair {n}")
