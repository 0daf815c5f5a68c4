"""The ``grounding`` layer's negation check, clause by clause.

An answer clause contradicts the context when the context clause that covers it
(at least ``negation_min_coverage`` of its content stems, found among the answer
sentence's best-matching context sentences) has the other polarity: one of them
asserts a negation ("not", "never", "no", "n't", "non-", hedged "may not" excepted)
or negates a word by prefix ("unbraked" against "braked") and the other does not.

What is *not* a flip (:mod:`gateway.text.polarity`): the answer's opening "No," /
"Not really:" / "He didn't:" (a reply to the question, see
:mod:`gateway.text.premise`); a rejected alternative (", not 1000 V"); a negation in
another clause of either sentence ("two USB-C ports, but no HDMI port"); a context
clause much longer than the answer's (it usually negates something the answer left
out); a first/second-person sentence with no fact that no context clause covers
well ("I do not like romantic comedies": an opinion); and a clause whose only negations
are the speaker's own experience or taste ("I didn't see Woman in Gold", "No I did not")
or a tag question ("…, didn't it?"): no context states what the speaker saw.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from gateway.text.antonyms import opposed
from gateway.text.context_facts import ContextFacts
from gateway.text.negation_scope import scope_shared
from gateway.text.polarity import (
    Clause,
    FlipCues,
    clause_polarity,
    flip_by_prefix,
    may_flip,
    polar,
)

__all__ = ["AnswerClauses", "clause_flip"]

@dataclass(slots=True)
class AnswerClauses:
    """What :func:`clause_flip` reads of the answer sentence alone, kept for its next call
    on the same sentence (another configuration's check of it)."""

    polar: bool | None = None
    """:func:`~gateway.text.polarity.polar` of the sentence after its opening particle."""
    clauses: list[Clause] | None = None
    """Its clauses of two stems or more (:func:`~gateway.text.polarity.clause_polarity`)."""
    pairs: dict[tuple[tuple[int, ...], float], list[_Pair]] = field(default_factory=dict)
    """Per (context sentences, ``min_coverage``): each answer clause's best-covering
    context clause (:func:`_pairs`), the same for every configuration."""


_Pair = tuple[Clause, float, Clause, str, frozenset[tuple[str, int]]]
"""An answer clause, its best coverage, that context clause, its sentence's text and the
directions of its sentence."""


_NOT = r"(?:n['’]t|\s+not)"
_SPEAKER_NEG = re.compile(
    r"\bI\s+(?:(?:do|did|have|had|am|was|could|would|can|will|have)" + _NOT + r"|never|can['’]t"
    r"|won['’]t)\s+(?:really\s+|yet\s+|ever\s+|even\s+)?(?:(?:see|seen|saw|watch\w*|read|like[sd]?"
    r"|love[sd]?|enjoy\w*|care|hear|heard|listen\w*|visit\w*|been|gone|went|go|tried|try)\b"
    r"|(?=\s*(?:[,.!?;]|$|(?:it|that|this|yet)\b)))", re.IGNORECASE)
"""A negation of the speaker's own experience or taste ("I didn't see", "I don't like",
"I did not." in reply): the context never states it."""
_TAG_NEG = re.compile(r"\b(?:is|was|did|does|do|has|have|had|were|are|wo|ca)n['’]t\s+"
                      r"(?:it|he|she|they|you|there|we)\s*[?.!]?\s*$", re.IGNORECASE)
"""A tag question at the end of a clause ("…, didn't it?"): it asks, it does not deny."""


def _speaker_only(clause: str) -> bool:
    """Whether every negation of an answer clause is the speaker's or a tag question."""
    rest = _TAG_NEG.sub("", _SPEAKER_NEG.sub(" ", clause))
    return rest != clause and not polar(rest)


_OPINION_COVERAGE = 0.8
"""A personal sentence is checked only when some context clause covers this much of it."""


def _coverage(a: Clause, c: Clause, idf: Callable[[str], float]) -> float:
    """IDF-weighted share of the answer clause's stems that the context clause has (a
    prefix negation counting as the word); 0 when more than one of its lower-case words
    (what it says about its names) is missing, or any when it has fewer than three."""
    have = c.stems | c.neg_stems
    missing_plain = sum(1 for s in a.plain if s not in have and s not in a.dir_stems)
    if missing_plain > (1 if len(a.plain) >= 3 else 0):
        return 0.0
    total = hit = 0.0
    for s in a.stems:
        if s in a.dir_stems and s not in have:
            continue  # "fell" against "up": the direction is compared on its own
        w = idf(s)
        total += w
        if s in have:
            hit += w
    return hit / total if total else 0.0


def _rough_coverage(a: Clause, have: frozenset[str]) -> float:
    """Share of the answer clause's stems a whole context sentence has (an upper bound
    of any of its clauses' IDF-weighted coverage, give or take prefixes and directions)."""
    if not a.stems:
        return 0.0
    hit = sum(1 for s in a.stems if s in have or s in a.dir_stems or s in a.neg_stems)
    return hit / len(a.stems) + 0.15  # slack: IDF weighting may favour the hits


def clause_flip(text: str, start: int, skip: list[tuple[int, int]], cf: ContextFacts,
                sids: Sequence[int], min_coverage: float, personal: str | None,
                cues: FlipCues, has: Callable[[frozenset[str]], bool],
                scope_check: bool = False, memo: AnswerClauses | None = None) -> str | None:
    """The context clause an answer clause negates (or is negated by), else ``None``.
    ``personal``: ``"first"`` (an opinion: never) or ``"second"`` person; ``cues``: the
    answer sentence's :func:`~gateway.text.polarity.flip_cues`, ``has`` whether it has a
    word of one of the given stems (asked only when a prefix negation needs it);
    ``scope_check``: a negation counts only when the other clause uses the word it
    governs (:mod:`gateway.text.negation_scope`); ``memo``: where the answer sentence's
    own polarity and clauses are kept once read, and its clauses' pairing with the
    context's (the same ``text``, ``start``, ``skip``, ``cf``, ``cues`` and ``has`` on
    every call with that memo): a second configuration only runs its own tests."""
    if not sids or personal == "first":
        return None
    if memo is None:
        memo = AnswerClauses()
    key = (tuple(sids), min_coverage)
    pairs = memo.pairs.get(key)
    if pairs is None:
        pairs = memo.pairs[key] = _pairs(text, start, skip, cf, sids, min_coverage, cues, has,
                                         memo)
    for a, cov, c, c_text, c_dirs in pairs:
        if personal == "second" and cov < _OPINION_COVERAGE:
            continue
        group = opposed(a.dirs, c_dirs)
        if group is not None:
            return c_text[c.start:c.end]
        by_prefix = flip_by_prefix(a, c)
        differ = (a.negated != c.negated) != by_prefix
        if not differ:
            continue
        if a.negated and not by_prefix and _speaker_only(text[a.start:a.end]):
            continue  # "I didn't see Woman in Gold": about the speaker, not the film
        if scope_check and not by_prefix and not (
                scope_shared(c_text[c.start:c.end], a.stems | a.neg_stems) if c.negated
                else scope_shared(text[a.start:a.end], c.stems | c.neg_stems)):
            continue  # the other clause never uses the negated word: a paraphrase
        if c.negated and not a.negated and len(c.stems) > 1.5 * len(a.stems) + 1:
            continue  # a long context clause negates something the answer left out
        return c_text[c.start:c.end]
    return None


def _has_none(stems: frozenset[str]) -> bool:
    return False


def _pairs(text: str, start: int, skip: list[tuple[int, int]], cf: ContextFacts,
           sids: Sequence[int], min_coverage: float, cues: FlipCues,
           has: Callable[[frozenset[str]], bool], memo: AnswerClauses) -> list[_Pair]:
    """Each answer clause whose best-covering clause of the ``sids`` sentences covers at
    least ``min_coverage`` of it, with that clause (:func:`clause_flip` before the
    configuration's own tests): none when nothing on either side can flip."""
    # Most sentence pairs have nothing that could flip (no negation on either side, no
    # opposite directions, no prefix-negated word the other has): no clause analysis.
    # (A negation in the answer always may: the context's cues are not read then.)
    # (The context sentence's stems are asked only about the answer's prefixed words.)
    if not cues.neg and not any(may_flip(cues, cf.flip_cues(sid), has,
                                         partial(cf.has_stem, sid) if cues.prefixed
                                         else _has_none) for sid in sids):
        return []
    # Nothing to flip when neither side has a negation, a negating prefix or a direction
    # word (most sentences): the clause analysis is skipped.
    answer_polar = memo.polar
    if answer_polar is None:
        answer_polar = memo.polar = polar(text[start:])
    if not answer_polar and not any(cf.polar(sid) for sid in sids):
        return []
    mine = memo.clauses
    if mine is None:
        mine = memo.clauses = [a for a in clause_polarity(text, skip, start)
                               if len(a.stems) >= 2]
    # A context sentence whose words cover no answer clause well enough cannot hold the
    # clause that flips it: its clauses are not analysed.
    sids = [sid for sid in sids if (answer_polar or cf.polar(sid))
            and any(_rough_coverage(a, cf.sentence_stems(sid)) >= min_coverage for a in mine)]
    if not sids:
        return []
    context: list[Clause] = []
    texts: dict[int, str] = {}
    dirs: dict[int, frozenset[tuple[str, int]]] = {}
    for sid in sids:  # (each sentence's text and directions read once, not per clause)
        its = cf.clauses(sid)
        text_of = cf.index.sentences[sid].text
        # Directions are compared with the clause's whole sentence: "revenue of $4.2
        # billion, up 8 %" puts the direction in a clause of its own.
        dirs_of = frozenset().union(*(d.dirs for d in its))
        for c in its:
            context.append(c)
            texts[id(c)] = text_of
            dirs[id(c)] = dirs_of
    out: list[_Pair] = []
    for a in mine:
        best: tuple[float, int, Clause] | None = None
        for c in context:
            cov = _coverage(a, c, cf.stem_idf)
            if best is None or (cov, -len(c.stems)) > (best[0], -best[1]):
                best = (cov, len(c.stems), c)
        if best is None or best[0] < min_coverage:
            continue
        cov, _, c = best
        out.append((a, cov, c, texts[id(c)], dirs[id(c)]))
    return out
