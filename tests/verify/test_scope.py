"""``context.max_chars`` (skip / truncate / refuse) and what one job's policies share."""

from __future__ import annotations

from typing import Any

from gateway.sources.context import ContextSpec
from gateway.verify.scope import JobScope, bounded_context

MESSAGES: Any = [{"role": "system", "content": "a" * 600},
                 {"role": "tool", "tool_call_id": "t1", "content": "b" * 600},
                 {"role": "user", "content": "question"}]


def _spec(**kw: Any) -> ContextSpec:
    return ContextSpec(sources=["system", "tools"], **kw)


def test_a_context_within_max_chars_is_whole() -> None:
    bounded = bounded_context(MESSAGES, _spec(max_chars=1200), None)
    assert bounded.oversize is None
    assert [len(d.text) for d in bounded.context.documents] == [600, 600]


def test_truncate_keeps_the_first_max_chars_in_document_order() -> None:
    bounded = bounded_context(MESSAGES, _spec(max_chars=700, on_oversize="truncate"), None)
    assert [len(d.text) for d in bounded.context.documents] == [600, 100]
    assert bounded.oversize is not None and bounded.oversize.chars == 1200
    assert "verified against its first 700 characters" in bounded.oversize.note()


def test_skip_and_refuse_keep_nothing_and_say_why() -> None:
    for action, note in (("skip", "not verified: the context (1200 characters) is over "
                                  "context.max_chars (1000)"),
                         ("refuse", "the context (1200 characters) is over "
                                    "context.max_chars (1000): refused")):
        bounded = bounded_context(MESSAGES, _spec(max_chars=1000, on_oversize=action), None)
        assert bounded.context.documents == []
        assert bounded.oversize is not None and bounded.oversize.note() == note


def test_no_limit_means_the_whole_context() -> None:
    bounded = bounded_context(MESSAGES, _spec(max_chars=None), None)
    assert bounded.oversize is None and len(bounded.context.documents) == 2


def test_a_job_extracts_one_context_per_spec_and_corpus() -> None:
    scope = JobScope()
    spec, corpus = _spec(), {"doc": "text"}
    first = scope.context(MESSAGES, spec, corpus)
    assert scope.context(MESSAGES, _spec(), corpus) is first  # an equal spec: shared
    assert scope.context(MESSAGES, _spec(max_chars=10), corpus) is not first
    assert scope.context(MESSAGES, spec, {"other": "text"}) is not first


def test_settings_compared_by_value_whatever_was_asked_before() -> None:
    """The kept answers of ``_equal`` are those of ``==``, for each pair of objects."""
    from gateway.verify import scope as scope_module

    a, a2, b = _spec(max_chars=10), _spec(max_chars=10), _spec(max_chars=11)
    for _ in range(2):  # the second round answers from what was kept
        assert scope_module._equal(a, a2) and scope_module._equal(a2, a)
        assert not scope_module._equal(a, b) and not scope_module._equal(b, a2)
        assert scope_module._equal(b, b)
    specs = [_spec(max_chars=n % 7 + 1) for n in range(scope_module._EQUAL_MAX + 50)]
    for x, y in zip(specs, specs[1:] + specs[:1], strict=True):  # past the bound
        assert scope_module._equal(x, y) == (x == y)
    assert len(scope_module._EQUAL) <= scope_module._EQUAL_MAX
    assert not scope_module._equal(a, b) and scope_module._equal(a, a2)


# -- the kept documents of a context given by system messages (bounded_context) --------

def _docs(bounded: Any) -> list[tuple[str, str, str, dict[str, str]]]:
    return [(d.id, d.text, d.kind, dict(d.attrs)) for d in bounded.context.documents]


def _same_as_plain(messages: Any, spec: ContextSpec, corpus: Any = None) -> None:
    """Kept (a miss, then a hit) == extracted afresh: documents, oversize, corpus; and
    every call gets a context of its own (the memo is per request)."""
    from gateway.verify.scope import bounded_plain

    plain = bounded_plain(messages, spec, corpus)
    first, again = bounded_context(messages, spec, corpus), bounded_context(messages, spec,
                                                                              corpus)
    for got in (first, again):
        assert _docs(got) == _docs(plain)
        assert got.oversize == plain.oversize
        assert got.context.corpus == plain.context.corpus
    assert first.context is not again.context
    first.context.memo("k", lambda: 1)
    assert again.context.memo("k", lambda: 2) == 2


SPECS = (ContextSpec(), ContextSpec(sources=("blocks",)), ContextSpec(sources=("system",)),
         ContextSpec(sources=("system", "tools"), block_tags=("doc",)),
         ContextSpec(max_chars=1500, on_oversize="truncate"),
         ContextSpec(max_chars=1500, on_oversize="skip"),
         ContextSpec(max_chars=1500, on_oversize="refuse"))


def test_kept_documents_are_the_extracted_ones_on_every_labelled_context() -> None:
    """Every labelled context as the RAG traffic sends it (a ``<context>`` block in the
    system message, the question after it), as a bare system message, and split over a
    system and a developer message, under specs that read it differently."""
    from corpus_texts import real_texts

    texts = [t for t in dict.fromkeys(real_texts()) if len(t) >= 400]
    assert len(texts) > 150
    for text in texts:
        shapes = (
            [{"role": "system", "content": f"Answer from the document.\n<context>\n{text}"
                                            "\n</context>"},
             {"role": "user", "content": "Summarize the document."}],
            [{"role": "system", "content": text + text},
             {"role": "assistant", "content": None}, {"role": "user", "content": "Why?"}],
            [{"role": "developer", "content": f'<doc id="a">{text}</doc> rest'},
             {"role": "system", "content": f"<source>{text}</source>"},
             {"role": "user", "content": "Where?"}],
        )
        for messages in shapes:
            for spec in SPECS:
                _same_as_plain(messages, spec, {"x": "y"})


def test_a_message_that_may_give_a_document_is_never_a_key() -> None:
    """Blocks in a user message, tool and function results, parts, non-dict messages:
    extracted afresh (the key would hold the question), and still the same documents."""
    from gateway.verify.scope import _system_texts

    system = {"role": "system", "content": "s" * 1200 + "<context>x</context>"}
    for other in ({"role": "user", "content": "<context>c</context> why?"},
                  {"role": "tool", "tool_call_id": "t", "content": "result"},
                  {"role": "function", "name": "f", "content": "result"},
                  {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                  {"role": "system", "content": [{"type": "text", "text": "hi"}]},
                  {"role": "user", "content": 5}):
        messages: Any = [system, other]
        assert _system_texts(messages) is None
        for spec in SPECS:
            _same_as_plain(messages, spec)
    assert _system_texts([system, {"role": "user", "content": "why?"},
                          {"role": "assistant", "content": None}]) == (system["content"],)
    assert _system_texts([system, ("role", "user")]) is None  # type: ignore[list-item]


def test_the_kept_documents_do_not_depend_on_the_question_or_the_corpus() -> None:
    spec = ContextSpec()
    system = {"role": "system", "content": "<context>" + "word " * 400 + "</context>"}
    a = bounded_context([system, {"role": "user", "content": "one?"}], spec, None)
    b = bounded_context([system, {"role": "user", "content": "two?"}], spec, {"c": "t"})
    assert _docs(a) == _docs(b) and b.context.corpus == {"c": "t"} and a.context.corpus == {}


def test_the_kept_texts_stay_within_their_bound() -> None:
    from gateway.verify import scope as S

    spec = ContextSpec()
    for i in range(40):
        bounded_context([{"role": "system", "content": f"{i} " + "z" * 100_000}], spec, None)
    assert S._kept_chars[0] <= S.KEEP_TOTAL_CHARS
    assert S._kept_chars[0] == sum(sum(map(len, k[1])) for k in S._KEPT)


def test_a_kept_entry_replaced_for_a_new_spec_is_counted_once(monkeypatch: Any) -> None:
    """A reload's spec may reuse a freed spec's id: its entry is replaced, not added."""
    from gateway.verify import scope as S

    monkeypatch.setattr(S, "_KEPT", {})
    monkeypatch.setattr(S, "_kept_chars", [0])
    spec, stale = ContextSpec(), ContextSpec()
    text = "<context>" + "word " * 400 + "</context>"
    S._KEPT[(id(spec), (text,))] = (stale, (), None)
    S._kept_chars[0] = len(text)
    bounded = bounded_context([{"role": "system", "content": text}], spec, None)
    assert S._KEPT[(id(spec), (text,))][0] is spec and _docs(bounded)
    assert S._kept_chars[0] == len(text) == sum(sum(map(len, k[1])) for k in S._KEPT)
