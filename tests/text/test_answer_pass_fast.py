"""Session 8's cheaper steps of the grounding layer's pass over the answer sentences
must give what their plain forms give: each shortcut against a reference written the
plain way (``_PLAIN_*`` / ``_reference_*`` here), on every sentence of the repository's
labelled texts and on noise built to hit the shortcut's edges.

- ``frames._CLAUSE_CUT``: opens with the class of the characters a cut starts with, a
  look-behind per branch (was an alternation of three branches);
- ``tokens._NEG_RE``, ``polarity._POLAR`` and ``measures._CLOCK_HINT``: open with a case-sensitive class of
  the letters a match starts with, the rest case-insensitive (were a look-ahead and a
  case-insensitive class, which get no fast scan). Python's case-insensitive matching
  also folds some non-ASCII letters ("ı", "K", "ſ"): every code point is tried;
- ``measures._sentence_clocks``: in ASCII text the digit scan is ``[0-9]``, not ``\\d``;
- ``tokens.content_words``: one pass over the tokens as given, no set differences first.
"""

from __future__ import annotations

import random
import re

import pytest
from corpus_texts import assert_same_matches, real_texts, sentence_clocks_plain

from gateway.text import frames as F
from gateway.text import measures as M
from gateway.text import polarity as P
from gateway.text import tokens as T
from gateway.text.tokens import NUMBER_WORDS, STOPWORDS, split_sentences, tokenize

_PLAIN_CLAUSE_CUT = re.compile(
    r"[;:()]\s*|,\s+(?:(?:and|but|while|whereas|or|so|although|though|which|who|whose)\s*)?|"
    r"\s+(?:(?:but|while|whereas|although|though|because|unless)\s+|and\s+(?=[A-Z])|"
    r"[—–-]\s+)")

_PIECES = [" ", "  ", "\t", "\n", "\u00a0", ",", ", ", ",  ", ";", ":", "(", ")", " (", ") ",
           " - ", " — ", " – ", "-", " but ", " and ", " and The", " and the", ", and ",
           ", which", ",which", " while ", " unless", " because ", " though", "although ",
           "word", "Name", "330 m", "it's", "é", "x"]


_PLAIN_NEG = re.compile(
    r"(?=[ncwf])(?:\b(?:not|no|never|none|nobody|nothing|neither|nor|cannot|without)\b"
    r"|n[’']t\b|\bfail(?:s|ed)?\s+to\b)", re.IGNORECASE)
_PLAIN_POLAR = re.compile(
    r"(?=[ncwu])(?:\b(?:not|no|never|none|nobody|nothing|neither|nor|cannot|without|non)\b"
    r"|n[’']t\b|\bun\w{4,}(?:ed|able|ible)\b)", re.IGNORECASE)
_PLAIN_CLOCK_HINT = re.compile(r"[\dnm](?:(?<=\d)\s*[ap]\.?m|(?<=n)oon|(?<=m)idnight)",
                               re.IGNORECASE)
_WORDS = ["not", "No", "NOT", "n't", "n’t", "N'T", "never", "none", "nobody", "nothing",
          "neither", "nor", "cannot", "without", "fail to", "fails  to", "failed\tto", "fail",
          "knot", "snow", "can't", "won't", "nt", "N", "am", "pm", "a.m", "P.M", "noon", "NOON",
          "midnight", "mıdnıght", "MIDNİGHT", "3", "12", "9am", " ", "  ", ".", ",", "x", "é",
          "ı", "K", "ſ", "_", "-", "'", "’", "t", "non", "Non-", "unhappy", "UNBREAKABLE",
          "unseen", "unsolved", "undone", "uncle", "un", "ed", "able", "ible"]


def _sentences() -> list[str]:
    return [s.text for t in real_texts() for s in split_sentences(t)]


def _noise(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def test_clause_cut_is_the_plain_alternation() -> None:
    texts = _sentences()
    cuts = 0
    for text in texts + _noise(8, 20000):
        assert_same_matches(F._CLAUSE_CUT, _PLAIN_CLAUSE_CUT, text)
        cuts += len(F.clauses(text)) > 1
    assert len(texts) > 5000 and cuts > 3000  # many sentences have more than one clause


def _word_noise(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 10))) for _ in range(n)]


def _around_each_code_point(tails: list[str]) -> list[str]:
    """Code points alone, after a letter, and before each of ``tails`` (a match's first
    letter may be any character the case-insensitive form folds to it): every one below
    U+2200 and every other one whose lower or upper case has an ASCII letter ("K")."""
    out = []
    for cp in range(0x110000):
        c = chr(cp)
        if cp >= 0x2200 and not any(ch.isascii() for ch in c.lower() + c.upper()):
            continue
        out += [c, "x" + c, " " + c] + [c + t for t in tails] + [" 5" + c + t for t in tails]
    return out


@pytest.mark.parametrize(("fast", "plain", "seed", "tails"), [
    pytest.param(T._NEG_RE, _PLAIN_NEG, 9, ["ot", "'t", "annot", "ithout", "ail to", "ever"],
                 id="negation-cues"),
    pytest.param(P._POLAR, _PLAIN_POLAR, 12, ["ot", "on", "'t", "annot", "ithout", "nsolved"],
                 id="polar"),
    pytest.param(M._CLOCK_HINT, _PLAIN_CLOCK_HINT, 10, ["m", " pm", "oon", "idnight", "ıdnıght"],
                 id="clock-hint"),
])
def test_case_sensitive_opening_class_is_the_plain_form(
        fast: re.Pattern[str], plain: re.Pattern[str], seed: int, tails: list[str]) -> None:
    texts = _sentences() + _word_noise(seed, 30000)
    for text in texts:
        assert_same_matches(fast, plain, text)
    for text in _around_each_code_point(tails):
        assert_same_matches(fast, plain, text)
    assert sum(fast.search(t) is not None for t in texts) > 5000


def test_sentence_clocks_are_the_one_condition() -> None:
    texts = _sentences() + _word_noise(11, 30000) + [
        "at NOON", "at noon", "mıdnıght", "MIDNİGHT", "5 ᴘm", "at 5 pm", "at ５ pm", "at ５:30",
        "Midnight", "12:30", "9am:", "noon:", "١٢ pm", "at 3 PM.", "x:y"]
    found = 0
    for text in texts:
        got = M._sentence_clocks(text)
        assert got == sentence_clocks_plain(text), text[:80]
        found += bool(got)
    assert found > 300


def _reference_content_words(tokens: list[str] | set[str] | frozenset[str]) -> set[str]:
    return {t for t in set(tokens) - STOPWORDS - NUMBER_WORDS
            if len(t) > 1 and (t.isalpha() or not any(c.isdigit() for c in t))}


def test_content_words_are_the_set_differences() -> None:
    rng = random.Random(13)
    odd = ["a", "x", "1", "12", "3rd", "x2", "٣", "²", "-", "e-mail", "o'clock", "the", "and",
           "seven", "dozen", "Ⅻ", "ab", "é", "covid-19", "b", "it's", "nine", "no"]
    lists = [tokenize(t) for t in _sentences()]
    lists += [[rng.choice(odd) for _ in range(rng.randint(0, 12))] for _ in range(20000)]
    kept = 0
    for tokens in lists:
        want = _reference_content_words(tokens)
        assert T.content_words(tokens) == want, tokens[:12]
        assert T.content_words(set(tokens)) == want
        assert T.content_words(frozenset(tokens)) == want
        kept += len(want)
    assert kept > 50000
