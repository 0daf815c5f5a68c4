"""``redact_secrets`` returns a text in which no pattern can match without scanning it;
its result must be what the two patterns' scan gives, for every text (the audit
record's explanations, reasons and errors go through it)."""

from __future__ import annotations

import random

import pytest

from gateway.redact import _EMAIL, _SECRET, redact_secrets


def scanned(text: str) -> str:
    """The patterns applied to every text (what ``redact_secrets`` did before)."""
    return _EMAIL.sub("[EMAIL]", _SECRET.sub("[REDACTED]", text))


CASES = [
    "",
    "4 sentence(s): 4 supported, 0 unsupported, 0 contradicted by the context; "
    "score 1.00 >= threshold 0.93",
    "answer cites no sources; nothing to check",
    "key sk-abcdefgh12345 in text", "SK-ABCDEFGH12345", "pk-abcdefgh_1", "rk-12345678",
    "sk-ant-abcdefgh", "Bearer abcdefgh.ijk", "BEARER\tabcdefghij",
    "api_key=abcd1234", "API-KEY: 'abcd1234'", "apikey = abcd", "x-api-key: abcdefg",
    "Authorization: Basic abcdefgh", "AUTHORIZATION=xyz12345",
    "mail me: someone@example.com", "a@b.co", "no at sign here",
    # Non-ASCII letters that case-insensitive matching pairs with ASCII ones (Kelvin
    # sign, long s, dotless i): these take the scan.
    "\u017fk-abcdefghij", "s\u212a-abcdefghij", "ap\u0131_key=abcd12345",
    "author\u0131zation: abcdef", "caf\u00e9 sk-abcdefghij", "na\u00efve text",
    "hyphen k- but nothing else", "apiary", "bearers of news",
]


@pytest.mark.parametrize("text", CASES)
def test_same_as_the_scan(text: str) -> None:
    assert redact_secrets(text) == scanned(text)


def test_secrets_are_still_masked() -> None:
    assert redact_secrets("token sk-abcdefgh12345") == "token [REDACTED]"
    assert redact_secrets("write to a.b@example.org") == "write to [EMAIL]"
    assert redact_secrets("\u017fk-abcdefghij") == "[REDACTED]"


def test_random_texts_same_as_the_scan() -> None:
    """Texts built from the patterns' own pieces, cut and joined at random."""
    rng = random.Random(12)
    pieces = ["sk", "pk", "rk", "-", "ant", "k-", "Bearer", "bearer ", "api", "API", "_",
              "key", "Key", "=", ":", " ", "'", '"', "authorization", "x-", "@", ".",
              "example", "com", "abcdefgh", "12345678", "\u212a", "\u017f", "\u0131",
              "\u00e9", "\t", "\n", "score 0.93", ";"]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert redact_secrets(text) == scanned(text), text
