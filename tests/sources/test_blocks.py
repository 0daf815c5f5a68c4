"""gateway.sources.blocks: the blocks and the stripped text are exactly those of the one
regular expression they stand for (``_REFERENCE``), on ordinary and hostile text."""

from __future__ import annotations

import random
import re

import pytest

from gateway.sources.blocks import find_blocks, split_blocks, strip_blocks

TAGS = ("context", "document", "source")


def _reference(tags: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(t) for t in tags)
    return re.compile(rf"<({alt})(\s[^>]*)?>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)


_ATTR = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


def _expected(text: str, tags: tuple[str, ...]) -> tuple[list[object], str]:
    pattern = _reference(tags)
    found = [(m.group(1).lower(),
              {a.group(1).lower(): a.group(2) or a.group(3) or a.group(4) or ""
               for a in _ATTR.finditer(m.group(2) or "")},
              m.group(3).strip()) for m in pattern.finditer(text)]
    return found, pattern.sub("", text)


def _check(text: str, tags: tuple[str, ...] = TAGS) -> None:
    found, stripped = _expected(text, tags)
    assert find_blocks(text, tags) == found
    assert strip_blocks(text, tags) == stripped
    assert split_blocks(text, tags) == (found, stripped)


@pytest.mark.parametrize("text", [
    "plain text, no tag",
    "<context>one</context> and <document id=\"d1\">two</document>",
    "<CONTEXT a='1' b=2>x</context >y<Source>z</SOURCE\n>",
    "<context>unclosed <context>inner</context> tail",
    "<context>a</document> <document>b</context></document>",
    "<context>nested <context>x</context> rest</context>",
    "<contextual>not a tag</contextual><context>ok</context>",
    "<context\n id=x>multi\nline</context>",
    "<source>a</ſource> b</source>",        # long s: a case-insensitive literal, not \1
    "<ſource>a</source> b</ſource>",
    "<document>x</DOCUMENT>",
    "<context>" + "<" * 50 + "</context>",
    "<context>x" * 20,
    "",
])
def test_the_reference_blocks(text: str) -> None:
    _check(text)


def test_tags_with_other_case_rules() -> None:
    for tags, text in [(("kit",), "<KIT>a</\u212aIT> b</kit>"),
                       (("İd",), "<İd>a</id> <id>b</İD> <i̇d>c</i̇d>")]:
        _check(text, tags)


def test_random_texts_give_the_reference_blocks() -> None:
    rng = random.Random(12)
    pieces = ["<context>", "</context>", "</context >", "<Context id='a'>", "<document>",
              "</DOCUMENT>", "<source x=1>", "</source>", "</ſource>", "<", ">", "/", " ",
              "word", "\n", "</", "<context", "id=\"q\"", "</contex>"]
    for _ in range(3000):
        _check("".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))))


def test_no_tags_finds_nothing() -> None:
    assert find_blocks("<context>x</context>", ()) == []
    assert strip_blocks("<context>x</context>", ()) == "<context>x</context>"
    assert split_blocks("<context>x</context>", ()) == ([], "<context>x</context>")
