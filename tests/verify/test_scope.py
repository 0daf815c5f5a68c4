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
