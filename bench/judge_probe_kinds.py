"""The judge calls of the model-based layers, as ``bench/judge_probe.py`` sees them.

A prototype, not gateway code: it recognises each judge call the layers make from
its messages (their markers and system texts), builds the JSON Schema its reply
should follow, and rewrites it into a short prompt for small models. The design
it prototypes (each layer's reply schema beside its prompt, a schema built per
call from the item count) is in ``docs/design/judge-structured-output.md``.

Two schemas per call kind:

- ``full``: mirrors the JSON the layer's *current* prompt asks for (free-text
  ``reason`` / ``explanation`` fields, numeric confidence) — used with today's
  prompts, so only the decoding changes;
- ``minimal``: the smallest reply that carries what the layer scores (no free
  text, confidence as ``high|medium|low``, ids as enums) — used with the short
  prompts.

Both are in the strict-mode subset (every property required, no additional
properties; only ``type``, ``properties``, ``required``, ``additionalProperties``,
``items``, ``enum``, ``minItems`` / ``maxItems``, ``minimum`` / ``maximum``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.layers._json_reply import arr, obj  # the reply schemas the layers send

__all__ = ["Call", "classify", "instance", "schema_for", "short_messages", "validate"]

KINDS = ("nli", "sc", "se-sample", "se-equiv", "audit-decompose", "audit-facts",
         "audit-logic", "fc-label", "fc-correct")

_MARKERS = {"[verity:audit:decompose]": "audit-decompose",
            "[verity:audit:fact-check]": "audit-facts",
            "[verity:audit:logic-check]": "audit-logic",
            "[verity:fact-check:label]": "fc-label",
            "[verity:fact-check:correct]": "fc-correct"}
_SYSTEMS = {"You are a careful natural language inference": "nli",
            "You check statements for accuracy": "sc",
            "You compare answers by meaning": "se-equiv"}
_FACT_KINDS = ["opposite_direction", "numeric_deviation", "fabricated_number",
               "fabricated_fact", "unsupported_evaluation", "overgeneralization", "other"]
_LOGIC_KINDS = ["reversed_causality", "sycophancy", "overgeneralization", "missing_step",
                "concept_substitution", "other"]
_WORDS = ["high", "medium", "low"]


@dataclass(slots=True)
class Call:
    """One judge call: its kind and what its prompt holds (parsed from the text)."""

    kind: str
    count: int = 0
    """Items the reply must cover (hypotheses, claims, pairs); 0 when open-ended."""
    ids: list[str] = field(default_factory=list)
    """Item ids the reply may name (audit F1…/R1…, fact-check P1…/c1…)."""
    limits: dict[str, int] = field(default_factory=dict)
    parts: dict[str, str] = field(default_factory=dict)
    """The data pieces of the prompt (premise, context, listed items …)."""


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _between(text: str, start: str, end: str) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    j = text.find(end, i + len(start))
    return text[i + len(start):j if j >= 0 else len(text)]


def _numbered(block: str, pattern: str = r"^\d+\. ") -> list[str]:
    return [line for line in block.splitlines() if re.match(pattern, line)]


def classify(messages: Sequence[Mapping[str, Any]]) -> Call:
    """The kind of a judge call and its items (``se-sample`` when nothing matches:
    semantic-entropy's sampling call is the request's own conversation)."""
    system = next((_text(m) for m in messages if m.get("role") == "system"), "")
    user = _text(messages[-1]) if messages else ""
    kind = next((k for marker, k in _MARKERS.items() if user.startswith(marker)), None)
    kind = kind or next((k for head, k in _SYSTEMS.items() if system.startswith(head)), None)
    if kind is None:
        return Call("se-sample")
    call = Call(kind)
    if kind == "nli":
        premise = _between(user, 'Premise:\n"""\n', '\n"""\n\nHypotheses:\n')
        listed = _between(user, '\n"""\n\nHypotheses:\n', "\n\nFor each numbered hypothesis")
        call.parts = {"premise": premise or "", "listed": listed or ""}
        call.count = len(_numbered(listed or ""))
    elif kind == "sc":
        blocks = user.split("\n\n")
        fmt = next((i for i, b in enumerate(blocks) if b.startswith("Answer with strict JSON")),
                   len(blocks))
        listed_block = blocks[fmt - 1] if fmt > 0 else ""
        lead, _, listed = listed_block.partition("\n")
        call.parts = {"head": "\n\n".join(blocks[:fmt - 1]), "lead": lead, "listed": listed}
        call.count = len(_numbered(listed))
    elif kind == "se-equiv":
        asked = _between(user, "\nPairs:\n", "\n\nAnswer with strict JSON") or ""
        call.parts = {"question": _between(user, "Question: ", "\n\nAnswers:\n") or "",
                      "answers": _between(user, "\n\nAnswers:\n", "\n\nFor each numbered") or "",
                      "pairs": asked}
        call.count = len(_numbered(asked))
    elif kind == "audit-decompose":
        call.limits = {"facts": _int(r"at most (\d+) atomic", system, 5),
                       "chains": _int(r"at most (\d+) reasoning chains", system, 5)}
        call.parts = {"context": _between(user, "CONTEXT:\n", "\n\nANSWER:\n") or "",
                      "answer": user.split("\n\nANSWER:\n", 1)[-1]}
    elif kind in ("audit-facts", "audit-logic"):
        head = "FACTS:\n" if kind == "audit-facts" else "REASONING:\n"
        listed = user.split("\n\n" + head, 1)[-1]
        call.ids = re.findall(r"^([FR]\d+):", listed, re.MULTILINE)
        call.limits = {"errors": _int(r"Report at most (\d+) errors", system, 3)}
        call.parts = {"body": user.split("\n\n", 1)[-1]}
    elif kind == "fc-label":
        call.ids = re.findall(r"^(P\d+)$", user, re.MULTILINE)
        call.count = len(call.ids)
        call.parts = {"body": user.split("\n\n", 1)[-1]}
    elif kind == "fc-correct":
        call.ids = re.findall(r"^(c\d+)$", user, re.MULTILINE)
        call.count = len(call.ids)
        call.parts = {"body": user.split("\n\n", 1)[-1]}
    return call


def _int(pattern: str, text: str, default: int) -> int:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else default


# -- schemas -------------------------------------------------------------------------

def _id(call: Call) -> dict[str, Any]:
    # An enum, not integer minimum/maximum: llama-cpp-python's grammar enforces enums
    # but not numeric bounds (measured: id 42 for minimum 1, maximum 3).
    return {"enum": call.ids or list(range(1, max(call.count, 1) + 1))}


def schema_for(call: Call, profile: str = "minimal") -> dict[str, Any] | None:
    """The JSON Schema of ``call``'s reply (``None`` for free-text sampling calls)."""
    full = profile == "full"
    conf = {"type": "number", "minimum": 0, "maximum": 1} if full else {"enum": _WORDS}
    reason = {"reason": {"type": "string"}} if full else {}
    n = call.count
    if call.kind == "nli":
        item = obj({"id": _id(call),
                     "label": {"enum": ["entailment", "contradiction", "neutral"]},
                     "confidence": conf, **reason})
        return obj({"results": arr(item, n, n)})
    if call.kind == "sc":
        item = obj({"id": _id(call), "agrees": {"type": "boolean"}, "confidence": conf,
                     **reason})
        return obj({"results": arr(item, n, n)})
    if call.kind == "se-equiv":
        return obj({"results": arr(obj({"id": _id(call),
                                           "equivalent": {"type": "boolean"}}), n, n)})
    if call.kind == "audit-decompose":
        text = {"type": "string"}
        fact = obj({"id": text, "text": text}) if full else text
        chain = obj({**({"id": text} if full else {}), "premises": arr(text, 0, 3),
                      "conclusion": text})
        return obj({"facts": arr(fact, 0, call.limits.get("facts", 5)),
                     "reasoning": arr(chain, 0, call.limits.get("chains", 5))})
    if call.kind in ("audit-facts", "audit-logic"):
        facts = call.kind == "audit-facts"
        props: dict[str, Any] = {
            "fact" if facts else "chain": {"enum": call.ids} if call.ids else {"type": "string"},
            "level": {"enum": ["contradiction", "unsupported"]},
            "severity": {"enum": ["high", "low"]},
            "kind": {"enum": _FACT_KINDS if facts else _LOGIC_KINDS}}
        if full and facts:
            props |= {"answer_value": {"type": ["number", "null"]},
                      "context_value": {"type": ["number", "null"]}}
        if full:
            props["explanation"] = {"type": "string"}
        return obj({"errors": arr(obj(props), 0, call.limits.get("errors", 3))})
    if call.kind == "fc-label":
        item = obj({"id": _id(call),
                     "label": {"enum": ["supporting", "contradicting", "contextual"]},
                     "relevance": {"type": "number", "minimum": 0, "maximum": 1}})
        return obj({"pairs": arr(item, n, n)})
    if call.kind == "fc-correct":
        return obj({"corrections": arr(obj({"id": _id(call),
                                               "corrected": {"type": "string"}}), n, n)})
    return None


# -- short prompts ---------------------------------------------------------------------

_JSON_ONLY = "Reply with JSON only."


def short_messages(call: Call, messages: Sequence[Mapping[str, Any]],
                   question: str = "") -> list[dict[str, str]] | None:
    """``call`` as a short prompt for a small model (None: cannot rewrite it)."""
    p = call.parts
    if call.kind == "nli" and p.get("listed"):
        return _pair("You judge statements against a premise. " + _JSON_ONLY, (
            f'Premise:\n"""\n{p["premise"]}\n"""\n\nStatements:\n{p["listed"]}\n\n'
            "For each statement, using only the premise: entailment (the premise says it), "
            "contradiction (the premise says otherwise) or neutral (the premise does not "
            'say).\nJSON: {"results": [{"id": 1, "label": "entailment|contradiction|'
            'neutral", "confidence": "high|medium|low"}]}'))
    if call.kind == "sc" and p.get("listed"):
        head = p["head"] + "\n\n" if p["head"] else ""
        return _pair("You check statements. " + _JSON_ONLY, (
            f"{head}{p['lead']}\n{p['listed']}\n\n"
            'JSON: {"results": [{"id": 1, "agrees": true|false, '
            '"confidence": "high|medium|low"}]}'))
    if call.kind == "se-equiv" and p.get("pairs"):
        return _pair("You compare answers. " + _JSON_ONLY, (
            f"Question: {p['question']}\n\nAnswers:\n{p['answers']}\n\nPairs:\n{p['pairs']}\n\n"
            "For each pair: equivalent is true if both give the same answer to the "
            'question, false if any fact differs.\nJSON: {"results": [{"id": 1, '
            '"equivalent": true|false}]}'))
    if call.kind == "audit-decompose":
        f, r = call.limits.get("facts", 5), call.limits.get("chains", 5)
        q = f"QUESTION:\n{question}\n\n" if question else ""
        return _pair("You split an answer into facts. Do not judge them. " + _JSON_ONLY, (
            f"[verity:audit:decompose]\n\n{q}ANSWER:\n{p['answer']}\n\n"
            f"List at most {f} facts the answer states, one short sentence each in the "
            "answer's words (name the subject when the answer is a short phrase), and at "
            f"most {r} reasoning steps it takes (premises -> conclusion; [] if none).\n"
            'JSON: {"facts": ["..."], "reasoning": [{"premises": ["..."], '
            '"conclusion": "..."}]}'))
    if call.kind == "audit-facts":
        k = call.limits.get("errors", 3)
        return _pair("You check facts against a context, the only source of truth. "
                     + _JSON_ONLY, (
            f"[verity:audit:fact-check]\n\n{p['body']}\n\n"
            'List the wrong facts: level "contradiction" (the context says otherwise) or '
            '"unsupported" (the context does not say it). Severity "high" for a wrong or '
            'invented number, date or name or a reversed direction, else "low". Leave out '
            f"correct facts; at most {k}; [] if none.\n"
            'JSON: {"errors": [{"fact": "F1", "level": "...", "severity": "...", '
            '"kind": "..."}]}'))
    if call.kind == "audit-logic":
        k = call.limits.get("errors", 3)
        return _pair("You check reasoning against a context. " + _JSON_ONLY, (
            f"[verity:audit:logic-check]\n\n{p['body']}\n\n"
            "List the reasoning steps whose conclusion does not follow from the context: "
            'level "contradiction" or "unsupported"; severity "high" if the direction is '
            f'reversed or the conclusion changes, else "low". At most {k}; [] if none.\n'
            'JSON: {"errors": [{"chain": "R1", "level": "...", "severity": "...", '
            '"kind": "..."}]}'))
    if call.kind == "fc-label":
        return _pair("You label evidence for claims. " + _JSON_ONLY, (
            f"[verity:fact-check:label]\n\n{p['body']}\n\n"
            "For each pair, from the evidence alone: supporting (it says the claim), "
            "contradicting (it says otherwise) or contextual (neither); relevance 0-1.\n"
            'JSON: {"pairs": [{"id": "P1", "label": "...", "relevance": 0.5}]}'))
    if call.kind == "fc-correct":
        return _pair("You correct claims from their evidence. " + _JSON_ONLY, (
            f"[verity:fact-check:correct]\n\n{p['body']}\n\n"
            "Rewrite each claim so that it agrees with its evidence; change nothing else.\n"
            'JSON: {"corrections": [{"id": "c1", "corrected": "..."}]}'))
    return None


def _pair(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# -- validation and instances ------------------------------------------------------------

_TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                          "null": type(None)}


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Violations of the strict subset used here, as ``"<path>: <keyword>"`` (no values)."""
    out: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: enum"]
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is(value, t) for t in names):
            return [f"{path}: type"]
    if isinstance(value, int | float) and not isinstance(value, bool) and (
            value < schema.get("minimum", value) or value > schema.get("maximum", value)):
        out.append(f"{path}: bounds")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [f"{path}.{k}: required" for k in schema.get("required", ()) if k not in value]
        if schema.get("additionalProperties") is False:
            out += [f"{path}: additionalProperties" for k in value if k not in props][:1]
        for k, sub in props.items():
            if k in value:
                out += validate(value[k], sub, f"{path}.{k}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems",
                                                                             len(value)):
            out.append(f"{path}: items count")
        for item in value:
            out += validate(item, schema.get("items", {}), f"{path}[]")
            if len(out) > 20:
                break
    return out


def instance(schema: Mapping[str, Any]) -> Any:
    """The smallest value valid under ``schema`` (a perfect constrained decoder's reply,
    for tests and for capturing every phase's prompt without a model)."""
    if "enum" in schema:
        return schema["enum"][0]
    types = schema.get("type")
    kind = types[0] if isinstance(types, list) else types
    if kind == "object":
        return {k: instance(s) for k, s in schema.get("properties", {}).items()}
    if kind == "array":
        n = max(schema.get("minItems", 0), 1 if schema.get("maxItems", 1) else 0)
        sub = schema.get("items", {})
        items = [instance(sub) for _ in range(n)]
        for i, item in enumerate(items):  # item i answers id i+1 (or the i-th enum id)
            for key, spec in sub.get("properties", {}).items():
                if key in ("id", "fact", "chain") and isinstance(item, dict):
                    ids = spec.get("enum")
                    item[key] = ids[min(i, len(ids) - 1)] if ids else i + 1
        return items
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 0.5))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "The answer states this."
