"""A per-request index of grounding text, shared by the model-free layers.

:func:`context_index` builds a :class:`TextIndex` over a request's
:class:`~gateway.sources.context.GroundingContext` once and stores it in the context's
per-request memo under :data:`INDEX_KEY`, so ``grounding``, ``claims`` and
``citations`` all reuse one build. :func:`build_index` indexes any texts (the
grounding layer also indexes the user question with it).

What is indexed when the index is built: each sentence of every document and its
lower-cased tokens (for "does this word occur anywhere").

What is found only when a layer first asks (the answer decides what is needed),
then memoized on the index:

- the inverted index *content word -> sentence ids* (for "which context sentence
  best matches this answer sentence" without comparing every pair), for the words
  an answer uses, in one pass over the sentences (:meth:`TextIndex.prefetch`), or
  for every word ahead of the answer (:meth:`TextIndex.prefetch_all`, the gateway's
  prepare step);
- the numbers and dates of the documents (normalized, see
  :mod:`gateway.text.quantities`): scanned over whole documents, as before, but only
  once something asks :meth:`TextIndex.has_number` / ``has_date`` /
  ``numbers_of`` / ``dates_of`` — an answer without numbers or dates never pays;
- whether a sentence contains a negation cue (:meth:`TextIndex.negated`), per
  sentence — only best-matching sentences are ever asked.

Cost is linear in the context length; the build is pure Python over a few C-level
string operations per sentence, and look-ups afterwards are dictionary hits.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import log
from operator import attrgetter

from gateway.text.facts import NO_FACTS, DocText, Facts, RangeFacts, scan_facts
from gateway.text.memo import TextSource
from gateway.text.quantities import DateRef, Quantity, date_matches, number_in
from gateway.text.tokens import (
    STOPWORDS,
    Span,
    camel_glue_positions,
    has_negation,
    punct_to_space,
    split_sentences,
    tokenize,
    variants,
)

__all__ = [
    "INDEX_KEY",
    "IndexCache",
    "IndexedSentence",
    "Match",
    "RangeFacts",
    "TextIndex",
    "build_index",
    "context_index",
]

RAREST_WORDS = 6
"""Candidate sentences for a match come from this many of the rarest words."""

INDEX_KEY = "gateway.text.index"
"""Memo key of the context index in ``GroundingContext.memo``."""


@dataclass(slots=True)
class IndexedSentence:
    text: str
    doc_id: str
    tokens: frozenset[str] = frozenset()
    """Its lower-cased tokens."""


@dataclass(slots=True, unsafe_hash=True)
class Match:
    """The context sentence that best covers a set of answer words (a value, like
    :class:`~gateway.text.tokens.Span`: never mutated)."""

    sentence: int
    """Index into :attr:`TextIndex.sentences`."""
    coverage: float
    """IDF-weighted share of the answer words found in that sentence, in [0, 1]."""


@dataclass(slots=True)
class _WordInfo:
    """What :meth:`TextIndex.best_matches` needs of one indexed word."""

    size: int
    """Sentences containing it (0: none, or a stopword)."""
    idf: float
    posting: list[int]
    sids: frozenset[int] | None = None
    """``frozenset(posting)``, made when first needed (only for a sentence's common
    words, which are intersected with the candidates)."""


_NO_INFO = _WordInfo(0, 0.0, [], frozenset())
_SIZE = attrgetter("size")
_NO_POSTING: list[int] = []  # never mutated


@dataclass(slots=True)
class TextIndex:
    """Sentences, tokens and postings are built up front; numbers, dates and negation
    are found on first use (most answers need few of them, some none), memoized, and
    equal to what a full up-front scan would give."""

    sentences: list[IndexedSentence]
    vocab: frozenset[str]
    docs: list[DocText] = field(default_factory=list)
    _postings: dict[str, list[int]] = field(default_factory=dict)
    """Content word -> ids of the sentences containing it, filled on demand
    (:meth:`prefetch`): an answer asks for a few hundred of the context's words."""
    _facts: Facts | None = None
    _negated: dict[int, bool] = field(default_factory=dict)
    _ranges: dict[tuple[int, int], RangeFacts] = field(default_factory=dict)
    _all_postings: bool = False
    """Every word's posting is in ``_postings`` (:meth:`prefetch_all`)."""
    _infos: dict[str, _WordInfo] = field(default_factory=dict)
    """Form -> its posting, as a set too, and IDF weight (for :meth:`best_matches`)."""
    memo: dict[str, object] = field(default_factory=dict)
    """Further context-side analyses, each built on first use by the module that owns
    its key (e.g. :func:`gateway.text.context_facts.context_facts`)."""

    def facts(self) -> Facts:
        """Numbers and dates of all documents (scanned once, on the first call)."""
        if self._facts is None:
            self._facts = scan_facts(self.docs)
        return self._facts

    def numbers_of(self, sid: int) -> list[Quantity]:
        """The numbers stated in sentence ``sid`` (not inside a date), in text order."""
        return self.facts().by_sentence.get(sid, NO_FACTS)[0]

    def dates_of(self, sid: int) -> list[DateRef]:
        """The dates stated in sentence ``sid``, in text order."""
        return self.facts().by_sentence.get(sid, NO_FACTS)[1]

    def range_facts(self, lo: int, hi: int) -> RangeFacts:
        """Numbers and dates of sentences ``lo..hi-1`` (memoized per range)."""
        got = self._ranges.get((lo, hi))
        if got is None:
            by_sentence = self.facts().by_sentence
            found = [by_sentence[sid] for sid in sorted(by_sentence) if lo <= sid < hi]
            values = [q.value for numbers, _ in found for q in numbers]
            dates = [d for _, dates in found for d in dates]
            parts = {float(p) for d in dates for p in (d.year, d.day) if p is not None}
            got = self._ranges[(lo, hi)] = RangeFacts(values, set(values), dates,
                                                      set(values) | parts)
        return got

    def negated(self, sid: int) -> bool:
        """Whether sentence ``sid`` contains a negation cue (memoized per sentence)."""
        neg = self._negated.get(sid)
        if neg is None:
            neg = self._negated[sid] = has_negation(self.sentences[sid].text)
        return neg

    def has_number(self, q: Quantity) -> bool:
        """Whether a value matching ``q`` (precision-aware) is stated anywhere."""
        return number_in(q, self.facts().numbers)

    def has_date(self, d: DateRef) -> bool:
        """Whether a date compatible with ``d`` is stated anywhere."""
        facts = self.facts()
        if d.year is None:
            return date_matches(d, facts.dates)
        by_decade = facts.dates_by_decade
        near = by_decade.get(d.year // 10, [])
        return date_matches(d, near) or date_matches(d, by_decade.get(-1, []))

    def __bool__(self) -> bool:
        return bool(self.sentences)

    def resolve(self, word: str) -> str | None:
        """The form under which ``word`` occurs in the indexed text, or ``None``."""
        vocab = self.vocab
        if word in vocab:
            return word
        forms = variants(word)
        if vocab.isdisjoint(forms):  # (most misses: one C-level pass, no Python loop)
            return None
        for form in forms[1:]:
            if form in vocab:
                return form
        return None

    def resolve_all(self, words: Iterable[str]) -> dict[str, str | None]:
        """:meth:`resolve` of each word (an answer resolves its words once, then every
        check looks them up)."""
        resolve, vocab = self.resolve, self.vocab
        return {w: w if w in vocab else resolve(w) for w in words}  # (most are as written)

    def posting(self, form: str) -> list[int]:
        """Ids of the sentences containing ``form`` (ascending; empty for a stopword or
        a word not in the text)."""
        got = self._postings.get(form)
        if got is None:
            if self._all_postings or form not in self.vocab:
                return _NO_POSTING
            self.prefetch((form,))
            got = self._postings[form]
        return got

    def holds_all(self, words: Iterable[str]) -> bool:
        """Whether some sentence holds every word of ``words`` but the stopwords, each
        under its :meth:`resolve` form: the postings intersected from the shortest (no
        set of a long posting built when only whether one exists is asked). The
        resolve and posting look-ups are inlined (a name check asks this per name)."""
        vocab, known = self.vocab, self._postings
        postings: list[list[int]] = []
        for word in words:
            if word in STOPWORDS:
                continue
            form = word if word in vocab else self.resolve(word)
            if form is None:
                return False
            posting = known.get(form)
            if posting is None:
                posting = self.posting(form)
            if not posting:
                return False
            postings.append(posting)
        if len(postings) < 2:
            return bool(postings)
        postings.sort(key=len)
        if len(postings) == 2:  # (most names: the longer posting read up to a first hit)
            return not set(postings[0]).isdisjoint(postings[1])
        common = set(postings[0])
        for posting in postings[1:]:
            common.intersection_update(posting)
            if not common:
                return False
        return True

    def prefetch(self, forms: Iterable[str]) -> None:
        """Find the postings of ``forms`` in one pass over the sentences (the cost of
        one :meth:`posting` call for all of them)."""
        if self._all_postings:
            return
        known = self._postings
        # Only words of the text get an entry: a cached index shared by many requests
        # must not grow with every word some answer happened to use.
        need = set(forms).difference(known).intersection(self.vocab)  # (set operations in C)
        if not need:
            return
        wanted = need - STOPWORDS
        found: dict[str, list[int]] = {f: [] for f in need}
        if wanted:
            for sid, sentence in enumerate(self.sentences):
                for form in sentence.tokens & wanted:
                    found[form].append(sid)
        known.update(found)

    def prefetch_all(self) -> None:
        """Find the postings of every word now (work that needs no answer: the gateway
        does it while the upstream answers), so :meth:`prefetch` has nothing left to do."""
        if self._all_postings:
            return
        postings: dict[str, list[int]] = {}
        for sid, sentence in enumerate(self.sentences):
            for tok in sentence.tokens - STOPWORDS:
                got = postings.get(tok)
                if got is None:
                    postings[tok] = [sid]
                else:
                    got.append(sid)
        postings.update(self._postings)  # the same lists (empty for stopwords)
        self._postings = postings
        self._all_postings = True

    def _add_infos(self, forms: list[str]) -> None:
        self.prefetch(forms)
        n = len(self.sentences)
        for form in forms:
            posting = self.posting(form)
            self._infos[form] = _WordInfo(len(posting), log((n + 1) / len(posting)) + 1.0,
                                          posting) if posting else _NO_INFO

    def best_matches(self, words: Iterable[str], k: int,
                     forms: Mapping[str, str | None] | None = None) -> list[Match]:
        """The ``k`` sentences sharing the most IDF weight with ``words``, best first.

        Uses the inverted index, so the cost is proportional to the postings of the
        given words, never to the number of sentences. Ties go to the earlier sentence.
        ``forms`` is :meth:`resolve_all` of (at least) ``words`` when the caller has it.
        """
        n = len(self.sentences)
        if not n:
            return []
        max_idf = log(n + 1) + 1.0
        order = sorted(words)  # set order varies per process (hash seed)
        if forms is None:
            forms = self.resolve_all(order)
        infos = self._infos
        # The infos of the words found in the text, in word order, and the IDF sum of all
        # words, summed in that order (``max_idf`` for a word not found).
        while True:
            found: list[_WordInfo] = []
            total = 0.0
            for word in order:
                form = forms[word]
                if form is None:
                    total += max_idf
                    continue
                info = infos.get(form)
                if info is None:
                    break
                if not info.size:
                    total += max_idf
                    continue
                total += info.idf
                found.append(info)
            else:
                break
            # A form without its info yet: all of them in one pass, then again.
            self._add_infos([f for w in order if (f := forms[w]) is not None
                             and f not in infos])
        # Candidates come from the rarest words only, so a word that occurs in every
        # sentence never makes this O(sentences); common words still count in `total`
        # and in the gain of candidates that contain them. Rarest first, ties in word
        # order: a stable sort by posting length of the infos in word order.
        if len(found) > 1:
            found.sort(key=_SIZE)
        gained: dict[int, float] = {}
        if found:
            first = found[0]
            gained = dict.fromkeys(first.posting, first.idf)  # (0.0 + idf is idf)
            get = gained.get
            for info in found[1:RAREST_WORDS]:
                idf = info.idf
                for sid in info.posting:
                    gained[sid] = get(sid, 0.0) + idf
        for info in found[RAREST_WORDS:]:
            idf = info.idf
            # Only the candidates' sums change, each in the same (posting) order, so
            # the hits may come in any order; the intersection runs in C.
            sids = info.sids
            if sids is None:
                sids = info.sids = frozenset(info.posting)
            for sid in sids.intersection(gained):
                gained[sid] += idf
        if not gained or total <= 0:
            return []
        if k == 1:
            best = max(gained, key=lambda sid: (gained[sid], -sid))
            return [Match(best, gained[best] / total)]
        # Highest gain first, ties to the smaller id: ids sorted, then a stable sort by
        # gain (reverse keeps equal gains in id order). Both sorts run in C with no
        # Python call per candidate (3.5x faster than sorting (-gain, id) tuples).
        ranked = sorted(gained)
        ranked.sort(key=gained.__getitem__, reverse=True)
        return [Match(sid, gained[sid] / total) for sid in ranked[:k]]


def build_index(docs: Iterable[tuple[str, str]]) -> TextIndex:
    """Index ``(doc_id, text)`` pairs (see the module docstring)."""
    sentences: list[IndexedSentence] = []
    kept: list[DocText] = []
    for doc_id, text in docs:
        spans = split_sentences(text)
        if not spans:
            continue
        kept.append(DocText(text, len(sentences), [s.start for s in spans]))
        sentences += [IndexedSentence(span.text, doc_id, toks)
                      for span, toks in zip(spans, _sentence_tokens(text, spans), strict=True)]
    vocab = frozenset[str]().union(*(s.tokens for s in sentences))
    return TextIndex(sentences, vocab, kept)


def _sentence_tokens(text: str, spans: list[Span]) -> list[frozenset[str]]:
    """``frozenset(tokenize(span.text))`` for every span, lower-casing the text once.

    Slicing the lower-cased document equals lower-casing the slice when lower-casing
    maps character to character (no length change, no context-dependent final sigma);
    the few sentences with a glued ``"wordWord"`` to split are tokenized one by one.
    """
    low = punct_to_space(text.lower())
    if len(low) != len(text) or "\u03a3" in text:
        return [frozenset(tokenize(s.text)) for s in spans]
    out = [frozenset(low[s.start:s.end].split()) for s in spans]
    starts: list[int] | None = None
    for pos in camel_glue_positions(text):  # rare: most documents have none
        if starts is None:
            starts = [s.start for s in spans]
        n = bisect_right(starts, pos) - 1
        if n >= 0 and spans[n].start < pos < spans[n].end:
            out[n] = frozenset(tokenize(spans[n].text))
    return out


class IndexCache:
    """A bounded LRU of context indexes, shared across requests (RAG systems resend
    the same documents and system prompts constantly).

    Keyed by the documents' ids and texts; bounded by the number of
    characters indexed (an index costs about 25 bytes per character of context when
    built, 30–35 once prepared, up to about 50 as answers fill its per-word memos).
    An index only ever fills its memos (facts, negation), deterministically, so one
    may serve many requests. Not thread-safe: layers run on the event loop. Owned by a layer
    instance, never module-level.
    """

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        # An ordered dict is the LRU (most recent last): a hit costs one look-up and one
        # move_to_end (cachetools' LRUCache cost ~1 % of a warm verification per hit).
        self._lru: OrderedDict[tuple[tuple[str, str], ...], TextIndex] = OrderedDict()
        self._chars = 0
        self.hits = 0
        self.misses = 0

    def get(self, docs: Sequence[tuple[str, str]]) -> TextIndex:
        """The index of ``docs``, built on a miss (too large to keep: built, not kept)."""
        if self.max_chars <= 0:
            return build_index(docs)
        # Keyed by the documents themselves: a hit compares them in full (no digest to
        # collide), and str hashing is cheaper than a digest of their UTF-8 (which cost
        # ~0.5 % of a warm verification). The key keeps the texts alive while the index
        # lives: ~1-4 bytes a character beside its 25-50.
        key = docs if type(docs) is tuple else tuple((d, t) for d, t in docs)
        lru = self._lru
        index = lru.get(key)
        if index is not None:
            lru.move_to_end(key)
            self.hits += 1
            return index
        self.misses += 1
        index = build_index(docs)
        size = _indexed_chars(index)
        if size <= self.max_chars:
            while lru and self._chars + size > self.max_chars:  # least recently used first
                _, old = lru.popitem(last=False)
                self._chars -= _indexed_chars(old)
            lru[key] = index
            self._chars += size
        return index


def _indexed_chars(index: TextIndex) -> int:
    return max(1, sum(len(s.text) for s in index.sentences))


def context_index(context: TextSource, cache: IndexCache | None = None) -> TextIndex:
    """The request's context index, built on first use and memoized per request.

    With ``cache``, a context already indexed by an earlier request is reused
    (*warm*); otherwise the index is built inside the request (*cold*).
    """

    def build() -> TextIndex:
        docs = tuple([(d.id, d.text) for d in context.documents])  # (the cache's key)
        return build_index(docs) if cache is None else cache.get(docs)

    return context.memo(INDEX_KEY, build)  # type: ignore[no-any-return]
