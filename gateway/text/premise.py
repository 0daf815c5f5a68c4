"""The premise of a user's question: what it takes for granted, as a statement.

"The Eiffel Tower is 450 m tall, right?" presupposes *the Eiffel Tower is 450 m tall*;
"Why did Helix's revenue fall 8 %?" presupposes *Helix's revenue fell 8 %*; "Does the
T-750 have brakes?" asks about *the T-750 has brakes*; "The rent is €1,650, so how
much is the deposit?" asserts *the rent is €1,650*. :func:`premise_of` turns the last
question of the user's turn into that statement (tag questions, auxiliaries and "why"
removed), so it can be checked against the context like an answer sentence.

An answer that opens with "Yes" adopts the premise; one that opens with "No" (or "He
didn't:") denies it (:func:`gateway.text.polarity.leading_particle`). The context, not
the question, decides which of the two is right. Pure.
"""

from __future__ import annotations

import re

from gateway.text.tokens import split_sentences

__all__ = ["premise_of"]

_TAG = re.compile(
    r"\s*[,;]?\s*(?:right|correct|true|yes|no|ok|okay|isn['’]t\s+(?:it|that|he|she|there)|"
    r"is\s+it|aren['’]t\s+(?:they|there)|wasn['’]t\s+(?:it|he|she)|weren['’]t\s+they|"
    r"didn['’]t\s+(?:it|he|she|they|i|we|you)|doesn['’]t\s+(?:it|he|she)|don['’]t\s+(?:they|i|we|you)|"
    r"can['’]t\s+(?:it|i|we|you)|won['’]t\s+(?:it|they)|hasn['’]t\s+(?:it|he|she)|"
    r"haven['’]t\s+(?:they|i|we|you)|am\s+i\s+right|is\s+that\s+(?:right|correct|true))"
    r"\s*\?+\s*$", re.IGNORECASE)
_CONFIRM = re.compile(r"\s*(?:please\s+)?(?:confirm|verify|check)[^.?!]*[.?!]?\s*$",
                      re.IGNORECASE)
_AUX = re.compile(
    r"^(?:why\s+|how\s+come\s+)?(?:do|does|did|is|are|was|were|can|could|will|would|should|"
    r"has|have|had|may|might|must|shall)(?:n['’]t|\s+not)?\s+(?=\S)", re.IGNORECASE)
_WH = re.compile(r"^(?:what|which|who|whom|whose|when|where|how|why)\b", re.IGNORECASE)
_SO_WH = re.compile(r"\s*(?:[,;:]\s*(?:so|and|but|then)?|\s+so)\s+"
                    r"(?:what|which|who|when|where|how|why|can|could|do|does|is)\b.*$",
                    re.IGNORECASE | re.DOTALL)


def premise_of(question: str) -> str | None:
    """The statement the user's (last) question takes for granted, or ``None``.

    Yes/no questions and "why" questions give their proposition; a declarative clause
    before "so what…" gives itself; a plain wh-question ("When was it built?") gives
    nothing: it asserts nothing.
    """
    spans = split_sentences(question.strip())
    if not spans:
        return None
    text = spans[-1].text
    if len(spans) > 1 and not text.rstrip().endswith("?") and _CONFIRM.fullmatch(text):
        text = spans[-2].text  # "The tower is 450 m tall, right? Please confirm."
    text = text.strip()
    text = _CONFIRM.sub("", text) if not text.endswith("?") else text
    tagged = _TAG.search(text)
    if tagged is not None:
        return _clean(text[: tagged.start()])
    declared = _SO_WH.search(text)
    if declared is not None and declared.start() > 0 and not _WH.match(text):
        return _clean(text[: declared.start()])
    if text.endswith("?"):
        body = text.rstrip("?").strip()
        why = body.lower().startswith(("why ", "how come "))
        m = _AUX.match(body)
        if m is not None:
            return _clean(body[m.end():]) if (why or not _WH.match(body)) else None
        return None
    return None


def _clean(text: str) -> str | None:
    text = text.strip(" ,;:-")
    return text if len(text.split()) >= 2 else None
