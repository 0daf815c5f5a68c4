"""The task a request asks for, read from the request's form (``gateway.text.task``)."""

from __future__ import annotations

import pytest

from gateway.text.task import is_summary_request, request_task, speaker_turns


def user(q: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Some context."}, {"role": "user", "content": q}]


@pytest.mark.parametrize("question", [
    "Summarize the document above in a few sentences.",
    "Can you summarise this for my manager?",
    "Give me a short summary of the report.",
    "Please sum it up.",
    "TL;DR?",
    "What are the key points of this memo?",
    "Recap the meeting notes.",
])
def test_a_request_for_a_summary_is_the_summary_task(question: str) -> None:
    assert is_summary_request(question)
    assert request_task(user(question), question) == "summary"


@pytest.mark.parametrize("question", [
    "Answer in one sentence: when was the bridge completed?",
    "How many summits has she climbed?",   # "summit" is not "summary"
    "What is the maximum dose for adults?",
    "Confirm it is 450 m tall.",
])
def test_a_question_is_the_qa_task(question: str) -> None:
    assert not is_summary_request(question)
    assert request_task(user(question), question) == "qa"


def test_quoted_speaker_turns_make_a_dialogue_even_with_a_summary_word() -> None:
    q = "[Human]: I loved that book. [Assistant]: Which one? [Human]: Can you sum it up?"
    assert speaker_turns(q) == 3
    assert request_task(user(q), q) == "dialogue"


def test_an_earlier_assistant_turn_makes_a_dialogue() -> None:
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Summarize the text."}]
    assert request_task(msgs, "Summarize the text.") == "dialogue"
    assert request_task(msgs[2:], "Summarize the text.") == "summary"


def test_only_the_end_of_a_huge_question_is_read() -> None:
    q = "Summarize this. " + "x " * 10_000 + "What year was it built?"
    assert request_task(user(q), q) == "qa"


@pytest.mark.parametrize(("question", "task"), [
    ("[Human]: Do you know much about the Hartwell Library? ", "dialogue"),
    ("User: can you recommend a kettle like the Kestrel K2?", "dialogue"),
    ("What did the user say about the kettle?", "qa"),           # a label inside, not opening
    ("Note: the user asked about refunds. What is the policy?", "qa"),
])
def test_a_message_opening_with_a_speaker_label_is_a_one_turn_transcript(
        question: str, task: str) -> None:
    assert request_task(user(question), question) == task
