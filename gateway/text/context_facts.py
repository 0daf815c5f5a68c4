"""The context side of fact alignment: measures, names and slots of each sentence.

:func:`context_facts` gives the :class:`ContextFacts` of a :class:`TextIndex`,
built on first use and memoized on the index (so a cached index shares it across
requests). Everything in it is computed per sentence when first asked for:

- :meth:`~ContextFacts.measures` — the sentence's numbers as
  :class:`~gateway.text.measures.Measure` (unit, dimension, qualifier);
- :meth:`~ContextFacts.by_dim` — every measure of the context by dimension, for
  "is this quantity stated anywhere, in any unit"; :meth:`~ContextFacts.same_base`
  looks first in the sentences stating that number, so an answer whose values are all
  stated never has every measure of the context read;
- :meth:`~ContextFacts.names` — its names (entity candidates, plus a sentence-opening
  word the context writes as a name elsewhere, :func:`gateway.text.names.proper_words`,
  asked word by word: :class:`~gateway.text.names.ProperWords`);
- :meth:`~ContextFacts.words_of_stem` — the context's words with a given stem (for
  negation prefixes and stem IDF), found per stem in the sorted vocabulary;
- :meth:`~ContextFacts.slots` — each measure, date and name with its frame
  (:mod:`gateway.text.frames`);
- :meth:`~ContextFacts.idf` — the IDF weight of a frame key.

:func:`~gateway.text.slots.sentence_slots` builds the same slots for any sentence (the
answer's).
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from math import log
from typing import Any

from gateway.text.index import TextIndex
from gateway.text.measures import (
    COUNT,
    Measure,
    NumberMeasures,
    sentence_measures,
    years_as_measures,
)
from gateway.text.names import ProperWords, name_key, names_in
from gateway.text.polarity import (
    Clause,
    FlipCues,
    clause_polarity,
    contrast_spans,
    flip_cues,
    polar,
)
from gateway.text.quantities import DateRef, Quantity
from gateway.text.slots import Fact, sentence_slots
from gateway.text.stem import stem, words_with_stem
from gateway.text.tokens import STOPWORDS, Span, entity_candidates, tokenize
from gateway.text.units import factors_of

__all__ = ["KEY", "STATE_KEY", "ContextFacts", "context_facts"]

KEY = "gateway.text.context_facts"
"""Memo key (on the index) of a weak reference to its :class:`ContextFacts`."""
STATE_KEY = "gateway.text.context_facts.state"
"""Memo key (on the index) of what its :class:`ContextFacts` has found."""
VALUE_IDF = 2.5
"""Weight of a value or date inside another filler's frame (specific, like a rare word)."""


class ContextFacts:
    """Per-sentence measures, names and slots of one indexed context (see module doc).

    What it has found (its ``__dict__``: every memo, nothing that refers to the index)
    may be ``state`` shared with an earlier instance over the same index; the index
    itself is a slot, outside that state (see :func:`context_facts`)."""

    __slots__ = ("__dict__", "__weakref__", "index")

    def __init__(self, index: TextIndex, state: dict[str, Any] | None = None) -> None:
        self.index = index
        if state is not None:
            self.__dict__ = state  # the same dict: what either finds, both have
            return
        self._proper: ProperWords | None = None
        self._measures: dict[int, list[Measure]] = {}
        self._values: dict[int, NumberMeasures] = {}
        self._by_dim: dict[str, list[tuple[int, Measure]]] | None = None
        self._names: dict[int, list[Span]] = {}
        self._slots: dict[int, list[Fact]] = {}
        self._idf: dict[str, float] = {}
        self._dated: list[tuple[int, DateRef]] | None = None
        self._clauses: dict[int, list[Clause]] = {}
        self._stem_idf: dict[str, float] = {}
        self._polar: dict[int, bool] = {}
        self._cues: dict[int, FlipCues] = {}
        self._by_base: dict[tuple[str, float], list[Measure]] | None = None
        self._by_number: dict[float, list[int]] | None = None
        self._same_base: dict[tuple[str, float], list[Measure]] = {}
        self._sentence_stems: dict[int, frozenset[str]] = {}
        self._name_keys: dict[int, list[frozenset[str]]] = {}
        self._stem_words: dict[str, list[str]] = {}
        self._sorted_vocab: list[str] | None = None
        self._bases = [d.base for d in index.docs]

    def proper(self) -> ProperWords:
        """Words the context only writes capitalized (names), see ``proper_words``: asked
        word by word (:class:`~gateway.text.names.ProperWords`)."""
        if self._proper is None:
            self._proper = ProperWords([d.text for d in self.index.docs])
        return self._proper

    def _offset(self, sid: int) -> int:
        k = bisect_right(self._bases, sid) - 1
        doc = self.index.docs[k]
        return doc.starts[sid - doc.base]

    def measures(self, sid: int) -> list[Measure]:
        """The measures of sentence ``sid`` (offsets relative to the sentence)."""
        got = self._measures.get(sid)
        if got is None:
            values = self._values.get(sid)
            if values is not None:  # some of its measures asked for by base value before
                got = values.every(self.index.sentences[sid].tokens)
            elif not self.index.numbers_of(sid) and not self.index.dates_of(sid):
                got = []
            else:
                text, qs, ds = self._facts_of(sid)
                got = sentence_measures(text, qs, ds, self.index.sentences[sid].tokens)
            # Word values ("an hour", "a tenth") in sentences without digits are not
            # scanned here: the context states its facts with numbers.
            self._measures[sid] = got
        return got

    def _facts_of(self, sid: int) -> tuple[str, list[Quantity], list[DateRef]]:
        """Sentence ``sid``'s text, numbers and dates (offsets relative to it)."""
        off = self._offset(sid)
        return (self.index.sentences[sid].text,
                [Quantity(q.value, q.kind, q.unit, q.text, q.start - off, q.end - off,
                          q.sig_digits) for q in self.index.numbers_of(sid)],
                [_shift(d, off) for d in self.index.dates_of(sid)])

    def dates(self, sid: int) -> list[DateRef]:
        """The dates of sentence ``sid`` (offsets relative to the sentence)."""
        dates = self.index.dates_of(sid)
        if not dates:
            return []
        off = self._offset(sid)
        return years_as_measures(self.index.sentences[sid].text,
                                 [_shift(d, off) for d in dates])[0]

    def by_dim(self) -> dict[str, list[tuple[int, Measure]]]:
        """Every measure of the context, grouped by its dimension (without a rate's
        denominator)."""
        if self._by_dim is None:
            out: dict[str, list[tuple[int, Measure]]] = {}
            for sid in sorted(self.index.facts().by_sentence):
                for m in self.measures(sid):
                    out.setdefault(m.base_dim, []).append((sid, m))
            self._by_dim = out
        return self._by_dim

    def same_base(self, base_dim: str, base: float) -> list[Measure]:
        """Measures of ``base_dim`` whose value in base units is exactly ``base``: where a
        match is most likely, looked at before the whole dimension (:meth:`by_dim`).

        Until something reads every measure of the context, only those of the sentences
        that state a number which is ``base`` in one of the dimension's units (``30`` for
        30 years in seconds), or that year, are read: a subset of them (a rate, a unit
        the table lacks, a value without digits are left to the whole dimension), so
        most answers whose values are all stated never make the context read the
        others."""
        if self._by_base is not None or self._by_dim is not None:
            return self._by_value().get((base_dim, base), [])
        got = self._same_base.get((base_dim, base))
        if got is not None:
            return got
        by = self._by_number
        if by is None:
            by = self._by_number = self._numbers_stated()
        sids: set[int] = set()
        for f in (1.0, *factors_of(base_dim)):
            sids.update(by.get(_near(base / f), ()))
        got = [m for sid in sorted(sids) for m in self._with_base(sid, base_dim, base)]
        if got:  # the context's own values only: a cached index must not grow per answer
            self._same_base[(base_dim, base)] = got
        return got

    def _with_base(self, sid: int, base_dim: str, base: float) -> list[Measure]:
        """The measures of sentence ``sid`` with that base value: only those read
        (:class:`~gateway.text.measures.NumberMeasures`) unless the sentence's are."""
        got = self._measures.get(sid)
        if got is None:
            values = self._values.get(sid)
            if values is None:
                values = self._values[sid] = NumberMeasures(*self._facts_of(sid))
            some = values.with_base(base_dim, base)
            if some is not None:
                return some
            got = self.measures(sid)
        return [m for m in got if m.base == base and m.base_dim == base_dim]

    def _numbers_stated(self) -> dict[float, list[int]]:
        """Each number (rounded to 9 significant digits) and year the context states ->
        the ids of the sentences stating it."""
        by: dict[float, list[int]] = {}
        for sid, (numbers, dates) in self.index.facts().by_sentence.items():
            for v in [q.value for q in numbers] + [float(d.year) for d in dates
                                                   if d.year is not None]:
                by.setdefault(_near(v), []).append(sid)
        return by

    def _by_value(self) -> dict[tuple[str, float], list[Measure]]:
        if self._by_base is None:
            by: dict[tuple[str, float], list[Measure]] = {}
            for dim, ms in self.by_dim().items():
                for _, m in ms:
                    by.setdefault((dim, m.base), []).append(m)
            self._by_base = by
        return self._by_base

    def dated(self) -> list[tuple[int, DateRef]]:
        """Every date of the context with its sentence (offsets relative to it)."""
        got = self._dated
        if got is None:
            got = self._dated = [(sid, d) for sid in sorted(self.index.facts().by_sentence)
                                 for d in self.dates(sid)]
        return got

    def name_sids(self, key: frozenset[str]) -> list[int]:
        """Sentences that contain every word of a name key (where it may occur)."""
        sids: set[int] | None = None
        for word in key:
            if word in STOPWORDS:
                continue
            form = self.index.resolve(word)
            if form is None:
                return []
            got = set(self.index.posting(form))
            sids = got if sids is None else sids & got
            if not sids:
                return []
        return sorted(sids or ())

    def name_keys(self, sid: int) -> list[frozenset[str]]:
        """The :func:`~gateway.text.names.name_key` of each name of sentence ``sid``."""
        got = self._name_keys.get(sid)
        if got is None:
            got = self._name_keys[sid] = [name_key(n.text) for n in self.names(sid)]
        return got

    def names(self, sid: int) -> list[Span]:
        got = self._names.get(sid)
        if got is None:
            text = self.index.sentences[sid].text
            got = self._names[sid] = names_in(text, entity_candidates(text), self.proper())
        return got

    def sentence_stems(self, sid: int) -> frozenset[str]:
        """Stems of sentence ``sid``'s words (function words left out)."""
        got = self._sentence_stems.get(sid)
        if got is None:
            got = self._sentence_stems[sid] = frozenset(
                stem(t) for t in self.index.sentences[sid].tokens if t not in STOPWORDS)
        return got

    def has_stem(self, sid: int, stems: frozenset[str]) -> bool:
        """Whether sentence ``sid`` has a word with one of ``stems`` (function words
        aside): the words of each stem looked up in its token set, not every word of it
        stemmed."""
        got = self._sentence_stems.get(sid)
        if got is not None:
            return not stems.isdisjoint(got)
        tokens = self.index.sentences[sid].tokens
        return any(t in tokens for s in stems for t in self.words_of_stem(s))

    def polar(self, sid: int) -> bool:
        """Whether sentence ``sid`` has a negation, negating prefix or direction word."""
        got = self._polar.get(sid)
        if got is None:
            got = self._polar[sid] = polar(self.index.sentences[sid].text)
        return got

    def flip_cues(self, sid: int) -> FlipCues:
        """What sentence ``sid`` could flip an answer clause with (negation, prefixes,
        directions), read once per context sentence from its indexed tokens."""
        got = self._cues.get(sid)
        if got is None:
            sentence = self.index.sentences[sid]
            got = self._cues[sid] = flip_cues(sentence.tokens,
                                              lambda: tokenize(sentence.text))
        return got

    def clauses(self, sid: int) -> list[Clause]:
        """The clauses of sentence ``sid`` with their stems and negation."""
        got = self._clauses.get(sid)
        if got is None:
            text = self.index.sentences[sid].text
            got = self._clauses[sid] = clause_polarity(text, contrast_spans(text))
        return got

    def slots(self, sid: int) -> list[Fact]:
        """Every fact of sentence ``sid`` with its frame."""
        got = self._slots.get(sid)
        if got is None:
            text = self.index.sentences[sid].text
            got = self._slots[sid] = sentence_slots(text, self.measures(sid), self.dates(sid),
                                                    self.names(sid))
            for fact in got:
                fact.sid = sid
            self._learn_idf(sid)
        return got

    def _learn_idf(self, sid: int) -> None:
        n = len(self.index.sentences)
        idf = self._idf
        for tok in self.index.sentences[sid].tokens:
            if tok in STOPWORDS:
                continue
            key = stem(tok)
            if key in idf:
                continue
            df = len(self.index.posting(tok)) or 1
            idf[key] = log((n + 1) / df) + 1.0

    def stem_idf(self, key: str) -> float:
        """IDF of a word stem over the context's sentences (a stem it lacks: the maximum)."""
        got = self._stem_idf.get(key)
        if got is None:
            n = len(self.index.sentences)
            df = max((len(self.index.posting(t)) for t in self.words_of_stem(key)),
                     default=0)
            got = self._stem_idf[key] = log((n + 1) / max(1, df)) + 1.0
        return got

    def words_of_stem(self, key: str) -> list[str]:
        """The context's words with stem ``key`` (function words aside), found in its
        sorted vocabulary (:func:`~gateway.text.stem.words_with_stem`) when first asked:
        an answer asks for a few dozen stems, stemming the whole vocabulary cost more.
        Memoized only when the context has such words (a cached index must not grow with
        every stem some answer happened to use)."""
        got = self._stem_words.get(key)
        if got is None:
            got = words_with_stem(key, self._vocab_sorted())
            if got:
                self._stem_words[key] = got
        return got

    def _vocab_sorted(self) -> list[str]:
        words = self._sorted_vocab
        if words is None:
            words = self._sorted_vocab = sorted(self.index.vocab - STOPWORDS)
        return words

    def idf(self, key: str) -> float:
        """IDF of a frame key (values and dates: ``VALUE_IDF``)."""
        if key.startswith("#"):
            return VALUE_IDF
        return self._idf.get(key, 1.0)

    def prepare(self) -> None:
        """What needs no answer and most answers ask for: the names, the sorted
        vocabulary and the sentences stating each number (:meth:`same_base`, asked for
        by every answer with a value). Not every measure by dimension (:meth:`by_dim`),
        nor every date (:meth:`dated`): on RAG news 27 % and 10 % of answers read them,
        and they cost more than the rest of a preparation — read on first use, as
        without one."""
        bool(self.proper())
        self._vocab_sorted()
        if self._by_number is None:
            self._by_number = self._numbers_stated()


def _near(x: float) -> float:
    """``x`` to 9 significant digits: a number and its value converted to base units and
    back compare equal."""
    return float(f"{x:.9g}")


def _shift(d: DateRef, off: int) -> DateRef:
    return DateRef(d.year, d.month, d.day, d.decade, d.text, d.start - off, d.end - off)


def context_facts(index: TextIndex) -> ContextFacts:
    """The :class:`ContextFacts` of ``index``: its findings are memoized on the index
    (so a cached index shares them across requests), the object itself only while
    someone holds it.

    The index's memo keeps the findings (:data:`STATE_KEY`) and a weak reference to the
    object (:data:`KEY`), never the object: it refers to the index, and that cycle made
    every index garbage only the cyclic GC could free — a context indexed for one
    request, or evicted from the cache, outlived it until a collection, and every
    collection walked all of it. Now the last reference dropped frees it at once."""
    ref = index.memo.get(KEY)
    got = ref() if isinstance(ref, weakref.ref) else None
    if got is None:
        state = index.memo.get(STATE_KEY)
        got = ContextFacts(index, state if isinstance(state, dict) else None)
        index.memo[STATE_KEY] = got.__dict__
        index.memo[KEY] = weakref.ref(got)
    assert isinstance(got, ContextFacts)
    return got


def is_count(m: Measure) -> bool:
    return m.dim == COUNT
