"""Reading a judge's JSON leniently, and the reply schemas beside each layer's prompt."""

from __future__ import annotations

import pytest

from gateway.layers import nli, self_consistency, semantic_entropy
from gateway.layers._audit_prompts import check_schema, decompose_schema
from gateway.layers._fact_check_prompts import correct_schema, label_schema
from gateway.layers._json_reply import parse_json_reply, salvage_cut
from gateway.layers._judged import repair_messages
from gateway.layers.base import JudgeError
from gateway.testing.judge import schema_instance
from gateway.upstream.judge import strict_schema


@pytest.mark.parametrize(("text", "value"), [
    ('{"a": 1}', {"a": 1}),
    ('  ```json\n{"a": [1, 2]}\n```  ', {"a": [1, 2]}),
    ('```\n{"a": 1}\n```', {"a": 1}),
    ('Sure! Here it is: {"a": "x}"} -- and a note {not json}.', {"a": "x}"}),
    ('{"a": [1, 2,],}', {"a": [1, 2]}),                       # trailing commas
    ('Note {first} then {"results": [{"id": 1}]} done', {"results": [{"id": 1}]}),
    ("[1, 2]", [1, 2]),
    ('{"s": "a \\" quoted { brace"} tail }', {"s": 'a " quoted { brace'}),
])
def test_lenient_extraction(text: str, value: object) -> None:
    assert parse_json_reply(text) == value


@pytest.mark.parametrize(("text", "truncated", "message"), [
    ("no json here", False, r"^judge reply is not JSON \(12 chars\)$"),
    ("   ", False, r"^judge reply is empty$"),
    ('{"results": [{"id": 1, "label": "entail', True, r"^judge reply cut at max_tokens"),
    ('{"results": [{"id": 1, "label": "entail', False, r"^judge reply is not JSON"),
])
def test_unusable_replies_are_named_without_their_text(text: str, truncated: bool,
                                                        message: str) -> None:
    with pytest.raises(JudgeError, match=message) as failed:
        parse_json_reply(text, truncated=truncated)
    assert "entail" not in str(failed.value) and "json here" not in str(failed.value)


@pytest.mark.parametrize(("cut", "kept"), [
    ('{"facts": ["a b", "c d", "e f e f e f e f', {"facts": ["a b", "c d"]}),
    ('{"facts": ["a \\" [x", "b"], "reasoning": [{"premises": ["p"], "conclusion": "q"}, '
     '{"premises": ["r", "s s s', {"facts": ['a " [x', "b"], "reasoning": [
         {"premises": ["p"], "conclusion": "q"}]}),
    ('{"facts": ["a"], "reasoning": [', {"facts": ["a"], "reasoning": []}),
    ('{"facts": [', {"facts": []}),
    ('Sure: {"facts": ["a"]} and more', {"facts": ["a"]}),
])
def test_a_cut_reply_keeps_only_its_complete_items(cut: str, kept: object) -> None:
    assert salvage_cut(cut) == kept


@pytest.mark.parametrize("cut", ["", "no json at all", '{"facts"', '{"facts": "one long',
                                 '{"n": 12'])
def test_a_cut_reply_without_a_complete_item_salvages_nothing(cut: str) -> None:
    assert salvage_cut(cut) is None


def test_strict_schema_drops_only_the_grammar_keywords() -> None:
    raw = {"type": "object", "required": ["maxLength"], "additionalProperties": False,
           "properties": {"maxLength": {"type": "array", "maxItems": 2,
                                        "items": {"type": "string", "maxLength": 9}}}}
    assert strict_schema(raw) == {**raw, "properties": {"maxLength": {
        "type": "array", "maxItems": 2, "items": {"type": "string"}}}}
    assert raw["properties"]["maxLength"]["items"]["maxLength"] == 9  # not mutated


def test_the_repair_note_goes_on_the_last_user_turn_and_quotes_only_the_problem() -> None:
    asked = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    out = repair_messages(asked, "judge reply misses items [2] of 1..2")
    assert out[0] == asked[0] and len(out) == 2 and asked[1]["content"] == "U"
    assert out[1]["content"].startswith("U\n\nYour previous reply could not be used: "
                                        "judge reply misses items [2] of 1..2.")


SCHEMAS = [nli.reply_schema(3), self_consistency.reply_schema(2),
           semantic_entropy.reply_schema(3), decompose_schema(5, 5),
           check_schema("fact", ["F1", "F2"], 3), check_schema("logic", ["R1"], 3),
           label_schema(4), correct_schema(2)]


@pytest.mark.parametrize("reply", SCHEMAS, ids=lambda r: r.name)
def test_every_reply_schema_is_in_the_strict_subset(reply: object) -> None:
    """What OpenAI's ``strict: true`` needs (every property required, no others), and
    only keywords its documented subset and Anthropic's input_schema take — as sent
    there (``strict_schema``); the schema itself may add ``maxLength``, which
    llama.cpp's grammar enforces."""
    allowed = {"type", "properties", "required", "additionalProperties", "items", "enum",
               "minItems", "maxItems"}

    def walk(node: object, keys: set[str]) -> None:
        assert isinstance(node, dict) and set(node) <= keys, node
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
            for sub in node["properties"].values():
                walk(sub, keys)
        if "items" in node:
            walk(node["items"], keys)

    schema = reply.schema  # type: ignore[attr-defined]
    assert schema["type"] == "object"
    walk(schema, allowed | {"maxLength"})
    walk(strict_schema(schema), allowed)
    assert reply.name.replace("_", "").isalnum()  # type: ignore[attr-defined]


def test_each_layer_reads_the_smallest_reply_its_schema_allows() -> None:
    """The contract between each schema and its layer's reader: a perfect constrained
    decoder's reply parses."""
    from gateway.layers.audit import parse_decomposition, parse_errors
    from gateway.layers.nli import _parse
    from gateway.layers.self_consistency import _votes

    assert len(_parse(schema_instance(SCHEMAS[0].schema), ["a", "b", "c"], None)) == 3
    assert len(_votes(schema_instance(SCHEMAS[1].schema), 2)) == 2
    facts, chains = parse_decomposition(schema_instance(SCHEMAS[3].schema), 5, 5)
    assert (facts, chains) == ([], [])
    assert parse_errors({"errors": [schema_instance(SCHEMAS[4].schema["properties"]["errors"]
                                                    ["items"])]}, "fact", 3)[0].item == "F1"
