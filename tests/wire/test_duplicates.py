"""gateway.wire.duplicates: a key twice in one object, found at any depth and in any spelling."""

from __future__ import annotations

import json

import orjson
import pytest

from gateway.wire.duplicates import _scan, duplicate_key

CASES = [
    (b'{"model": "a", "messages": [], "model": "b"}', "model"),
    (b'{"model": "a", "m\\u006fdel": "b"}', "model"),               # one key, two spellings
    (b'{"messages": [{"role": "user", "content": "x", "content": "y"}]}', "content"),
    (b'{"metadata": {"verity": {"p": 1, "p": 2}}}', "p"),
    (b'{"a": "\\"a\\": 1", "a" : 1}', "a"),                         # a key's text in a value
    (b'{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}', None),  # same key, other objects
    (b'[{"a": 1}, {"a": 2}]', None),
    (b'{"k": ["a", "a"], "v": "a"}', None),                         # values are not keys
    (b'"no object"', None),
    (b'{"\\u00e9": 1, "\xc3\xa9": 2}', "\u00e9"),
]


@pytest.mark.parametrize(("body", "key"), CASES)
def test_duplicate_key(body: bytes, key: str | None) -> None:
    orjson.loads(body)  # valid JSON, as the callers guarantee
    assert duplicate_key(body) == key
    assert _scan(body) == key  # the iterative fallback agrees


def test_nesting_beyond_the_recursion_limit_is_checked_iteratively() -> None:
    deep = b'{"a": ' * 1000 + b'{"x": 1, "x": 2}' + b"}" * 1000
    assert duplicate_key(deep) == "x"
    assert duplicate_key(deep.replace(b'"x": 2', b'"y": 2')) is None


def test_a_typical_sdk_body_has_none() -> None:
    messages = [{"role": "user", "content": "hello " * 100}] * 30
    body = json.dumps({"model": "m", "messages": messages, "metadata": {"a": "b"}}).encode()
    assert duplicate_key(body) is None
