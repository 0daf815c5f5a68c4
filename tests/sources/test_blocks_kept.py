"""``split_blocks_kept`` (a system message's blocks, kept per text) against the plain
``split_blocks`` scan it stands for."""

from __future__ import annotations

import pytest

from gateway.sources import blocks
from gateway.sources.blocks import KEEP_MIN_CHARS, split_blocks, split_blocks_kept
from gateway.sources.context import ContextSpec, extract_context

TAGS = ("context", "document", "source")
ARTICLE = " ".join(f"Sentence {i} of the article says {i * 7} things." for i in range(60))


@pytest.mark.parametrize("text", [
    "", "no tags at all", "short <context>x</context>",
    f"Answer from the document.\n<context>\n{ARTICLE}\n</context>",
    f'<document id="a">{ARTICLE}</document> between <source title="t">{ARTICLE}</source>',
    f"<context>{ARTICLE} <context>unclosed inner</context> tail <CONTEXT>open",
    f"<Context>{ARTICLE}</CONTEXT>\n\nAnswer briefly.",
])
def test_kept_split_is_the_plain_split(text: str) -> None:
    plain_found, plain_rest = split_blocks(text, TAGS)
    for _ in range(2):  # the first call scans (and maybe keeps), the second may hit
        found, rest = split_blocks_kept(text, TAGS)
        assert (list(found), rest) == (plain_found, plain_rest)


def test_a_repeated_long_system_message_is_scanned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "_KEPT", {})
    monkeypatch.setattr(blocks, "_kept_chars", [0])
    scans: list[str] = []
    real = blocks.split_blocks

    def counted(text: str, tags: tuple[str, ...]) -> object:
        scans.append(text)
        return real(text, tags)

    monkeypatch.setattr(blocks, "split_blocks", counted)
    text = f"Answer from the document.\n<context>\n{ARTICLE}\n</context>"
    assert len(text) >= KEEP_MIN_CHARS
    first = split_blocks_kept(text, TAGS)
    again = split_blocks_kept("".join(list(text)), TAGS)  # equal text, another object
    assert again == first and len(scans) == 1
    split_blocks_kept(text, ("document",))  # other tags: another entry
    assert len(scans) == 2
    short = "<context>tiny</context>"
    split_blocks_kept(short, TAGS)
    split_blocks_kept(short, TAGS)
    assert scans.count(short) == 2  # a short message is never kept


def test_kept_texts_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "_KEPT", {})
    monkeypatch.setattr(blocks, "_kept_chars", [0])
    monkeypatch.setattr(blocks, "KEEP_TOTAL_CHARS", 3 * KEEP_MIN_CHARS)
    texts = [f"<context>{i} {ARTICLE[:KEEP_MIN_CHARS]}</context>" for i in range(5)]
    for t in texts:
        split_blocks_kept(t, TAGS)
        assert blocks._kept_chars[0] <= 3 * KEEP_MIN_CHARS
        assert blocks._kept_chars[0] == sum(len(k[0]) for k in blocks._KEPT)
    assert (texts[-1], TAGS) in blocks._KEPT and (texts[0], TAGS) not in blocks._KEPT


def test_context_of_a_repeated_system_message_is_the_same() -> None:
    messages = [{"role": "system", "content": f"Be brief.\n<context>\n{ARTICLE}\n</context>"},
                {"role": "user", "content": "Summarize the document."}]
    first = extract_context(messages, ContextSpec())
    second = extract_context(messages, ContextSpec())
    assert first.documents == second.documents
    assert [(d.id, d.kind) for d in first.documents] == [("context-1", "block"),
                                                         ("system-2", "system")]
