"""A work credited to someone else (``gateway.text.roles``)."""

from __future__ import annotations

import pytest

from gateway.text.roles import role_conflict

BOOK = "Les Misérables is written by Victor Hugo. Les Misérables has genre Historical fiction"
FILM = "Sam Mendes directed Road to Perdition. Road to Perdition is starring Tom Hanks"
TOWER = ("The Harbour Tower was designed by Lena Okafor. It opened in 2019 and has 41 floors. "
         "The Riverside Library was designed by Tomas Berg.")
FIRM = "Quanta Robotics was founded by Mira Patel in 2011. Its head office is in Leeds."
KG = "Robert Rodriguez directed Planet Terror.Grindhouse is directed by Robert RodriguezGrindhouse is written by Quentin Tarantino"


@pytest.mark.parametrize(("sentence", "context", "who"), [
    ("Les Misérables was originally written by William Shakespeare.", BOOK, "Victor Hugo"),
    ("Road to Perdition was directed by Martin Scorsese.", FILM, "Sam Mendes"),
    ("The Harbour Tower, finished in 2019, was designed by Norman Reyes.", TOWER, "Lena Okafor"),
    ("Quanta Robotics was co-founded by Daniel Cho in 2011.", FIRM, "Mira Patel"),
    ("Grindhouse was directed by Steven Spielberg.", KG, "Robert Rodriguez"),
])
def test_a_credit_given_to_someone_else_is_read(sentence: str, context: str, who: str) -> None:
    why = role_conflict(sentence, context)
    assert why is not None and f"credits {who} " in why


@pytest.mark.parametrize(("sentence", "context", "dialogue"), [
    ("Les Misérables was written by Victor Hugo.", BOOK, ""),                 # right
    ("It was written by William Shakespeare.", BOOK, ""),                     # no work named
    ("Les Misérables was written by Victor Hugo and edited by Ann Lee.", BOOK, ""),
    ("The Riverside Library was designed by Tomas Berg.", TOWER, ""),         # its own credit
    ("The Harbour Tower was designed by Okafor's studio.", TOWER, ""),        # a word of the name
    ("Road to Perdition was directed by Martin Scorsese.", FILM,
     "[Human]: I thought Martin Scorsese made it?"),                          # the user named him
    ("Road to Perdition was produced by Dean Zanuck.", FILM, ""),             # another role
    ("The Cafe Aurora was designed by Norman Reyes.", TOWER, ""),             # another work
    ("Les Misérables was translated by Julie Rose and written by Victor Hugo.", BOOK, ""),
])
def test_the_right_credit_another_role_or_work_is_not(sentence: str, context: str,
                                                       dialogue: str) -> None:
    assert role_conflict(sentence, context, dialogue) is None


def test_bounded() -> None:
    assert role_conflict("x " * 50_000 + "Les Misérables was written by Bob Stone.", BOOK) is None
