"""A work credited to someone else: "Les Misérables was written by William Shakespeare."

Knowledge often states who made a work — "Les Misérables is written by Victor Hugo",
"Sam Mendes directed Road to Perdition" — and a reply that credits the same work, in
the same role, to a person the knowledge and the conversation never mention has
swapped the credit. No word check sees it when the reply brings in names of its own
(a dialogue reply does), and the binding check needs more shared words around the name
than "written by" gives.

:func:`role_conflict` reads an answer sentence for "<work> … <role> by <Name>" (written,
directed, produced, composed, designed, invented, painted, founded, illustrated), and
the context for the same role given to another person beside the same work's words
("<work> is written by <P>", "<P> wrote <work>"). Silent when the credited name (or a
word of it) is in the context or the dialogue, when the sentence also names the
context's person (a co-credit), when the work's words are not beside the context's
credit, and when the sentence names no work of its own ("It was written by …": the
pronoun is not resolved). Bounded: ``MAX_TEXT`` characters of each side.
"""

from __future__ import annotations

import re

__all__ = ["credits_someone", "role_conflict"]

MAX_TEXT = 20_000
"""Characters of the context (and of a sentence) read."""
WINDOW = 80
"""Characters beside a context credit in which the work's words must be."""

_WORD = r"(?:[A-Z]\.(?:\s?[A-Z]\.)*|[A-Z][\w'’-]*)"
"""A capitalised word, or initials ("J.K.", "R. R.")."""
_NAME = rf"({_WORD}(?:\s+(?:{_WORD}|de|van|von|da|del|di|le|la))*)"
_ROLES = {
    "written": "write", "wrote": "write", "directed": "direct", "produced": "produce",
    "composed": "compose", "designed": "design", "invented": "invent",
    "painted": "paint", "founded": "found", "illustrated": "illustrate",
}
_PASSIVE = "written|directed|produced|composed|designed|invented|painted|founded|illustrated"
_ACTIVE = "wrote|directed|produced|composed|designed|invented|painted|founded|illustrated"
_ANSWER = re.compile(rf"\b(?:co-)?({_PASSIVE})\s+by\s+{_NAME}")
_CONTEXT_PASSIVE = re.compile(rf"\b({_PASSIVE})\s+by\s+{_NAME}")
_CONTEXT_ACTIVE = re.compile(rf"{_NAME}\s+({_ACTIVE})\b")
_CAPS = re.compile(r"[A-Z][\w'’-]+")
_GLUE = re.compile(r"(?<=[a-z])(?=[A-Z])")
"""Knowledge snippets glue sentences ("Robert RodriguezGrindhouse is …"): a name ends there."""
_KEYS = (" by ",)
_SKIP = frozenset("it it's its he she they this that these those the a an and or but yes no "
                  "i you we his her their there also actually well sure oh".split())


def _clean(name: str) -> str:
    return _GLUE.split(name, 1)[0].rstrip(".'’")


def _words(name: str) -> list[str]:
    out = [w.lower().strip(".'’") for w in name.split()]
    return [w.removesuffix("'s").removesuffix("’s") for w in out if len(w) >= 4]


def _work_words(subject: str) -> set[str]:
    """Lower-case capitalised words of the sentence before the credit: the work's."""
    return {w.lower() for w in _CAPS.findall(subject) if w.lower() not in _SKIP}


def _credits(context: str) -> list[tuple[str, str, int, int]]:
    """Every ``(role, person, start, end)`` credit the context states; ``start``/``end``
    bound the span where the credited work's words must be."""
    out = []
    for m in _CONTEXT_PASSIVE.finditer(context):
        out.append((_ROLES[m.group(1)], _clean(m.group(2)), max(0, m.start() - WINDOW),
                    m.start()))
    for m in _CONTEXT_ACTIVE.finditer(context):
        out.append((_ROLES[m.group(2)], _clean(m.group(1)), m.end(), m.end() + WINDOW))
    return out


def credits_someone(sentence: str) -> bool:
    """Whether ``sentence`` credits someone ("… written by <Name>"): a cheap test before
    :func:`role_conflict` reads the context."""
    return " by " in sentence and _ANSWER.search(sentence[:MAX_TEXT]) is not None


def role_conflict(sentence: str, context: str, dialogue: str = "") -> str | None:
    """Why ``sentence`` credits a work the context credits to another person in the
    same role, or ``None`` (see the module docstring)."""
    sentence = sentence[:MAX_TEXT]
    if " by " not in sentence:
        return None
    context = context[:MAX_TEXT]
    known = (context + " " + dialogue[-MAX_TEXT:]).lower()
    credits: list[tuple[str, str, int, int]] | None = None
    for m in _ANSWER.finditer(sentence):
        name = _clean(m.group(2))
        words = _words(name)
        if not words or name.lower() in known or any(w in known for w in words):
            continue
        work = _work_words(sentence[: m.start()])
        if not work:
            continue
        if credits is None:
            credits = _credits(context)
        role = _ROLES[m.group(1)]
        low = sentence.lower()
        for c_role, person, start, end in credits:
            if c_role != role or person.lower() in low:
                continue
            beside = context[start:end].lower()
            if sum(1 for w in work if w in beside) * 2 >= len(work):
                return (f"{name}: the context credits {person} "
                        f"({m.group(1)} by) there")
    return None
