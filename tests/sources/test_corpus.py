"""gateway.sources.corpus: formats, metadata, errors naming file and line, caching."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.sources.corpus import Corpus, CorpusCache, CorpusError, load_corpus


def write(d: Path, name: str, text: str) -> Path:
    p = d / name
    p.write_text(text, encoding="utf-8")
    return p


def test_loads_txt_jsonl_md(tmp_path: Path) -> None:
    write(tmp_path, "sundara-54.txt", "Hanuman set fire to Lanka.\n")
    write(tmp_path, "refs.jsonl",
          '{"id": "nist-800-171", "text": "Protect CUI.", "authority": "government",'
          ' "published": "2020-02-01", "url": "https://nist.gov", "extra": 1}\n'
          '\n'
          '{"id": 7, "text": "Numeric id.", "authority": 0.4}\n')
    write(tmp_path, "guide.md", "# Style Guide\n\nUse short sentences.\n")
    write(tmp_path, "notes.csv", "ignored")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "deep.txt", "ignored too")
    c = load_corpus(tmp_path)
    assert isinstance(c, Corpus)
    assert dict(c) == {"sundara-54": "Hanuman set fire to Lanka.",
                       "nist-800-171": "Protect CUI.", "7": "Numeric id.",
                       "guide": "# Style Guide\n\nUse short sentences."}
    assert c.meta["nist-800-171"].authority == "government"
    assert c.meta["nist-800-171"].published == "2020-02-01"
    assert c.meta["nist-800-171"].url == "https://nist.gov"
    assert c.meta["nist-800-171"].origin.endswith("refs.jsonl:1")
    assert c.meta["7"].authority == 0.4 and c.meta["7"].origin.endswith("refs.jsonl:3")
    assert c.meta["guide"].title == "Style Guide"
    assert c.meta["sundara-54"].authority is None


def test_markdown_front_matter(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\nid: far-52\ntitle: FAR 52\nauthority: Regulatory\n"
                            "published: 2024-01-01\n---\n# Heading\nBody text.\n")
    c = load_corpus(tmp_path)
    assert c["far-52"] == "# Heading\nBody text."
    assert c.meta["far-52"].title == "FAR 52" and c.meta["far-52"].authority == "regulatory"


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a", "text": "x"', "invalid JSON"),
    ('["a", "x"]', "expected a JSON object"),
    ('{"text": "x"}', "'id'"),
    ('{"id": "a"}', "'text'"),
    ('{"id": "a", "text": "x", "authority": "tabloid"}', "unknown authority 'tabloid'"),
    ('{"id": "a", "text": "x", "authority": 2}', "not in [0, 1]"),
    ('{"id": "a", "text": "x", "published": "last week"}', "not an ISO date"),
])
def test_bad_jsonl_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    write(tmp_path, "src.jsonl", '{"id": "ok", "text": "fine"}\n\n' + line + "\n")
    with pytest.raises(CorpusError) as err:
        load_corpus(tmp_path)
    assert "src.jsonl:3: " in str(err.value) and message in str(err.value)


def test_duplicate_id_names_both_places(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "one")
    write(tmp_path, "b.jsonl", '{"id": "a", "text": "two"}\n')
    with pytest.raises(CorpusError, match=r"b\.jsonl:1: duplicate source id 'a'.*a\.txt"):
        load_corpus(tmp_path)


def test_unclosed_front_matter_and_bad_utf8(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\ntitle: x\nno end")
    with pytest.raises(CorpusError, match=r"a\.md: front matter"):
        load_corpus(tmp_path)
    (tmp_path / "a.md").unlink()
    (tmp_path / "b.txt").write_bytes(b"\xff\xfe bad")
    with pytest.raises(CorpusError, match=r"b\.txt: cannot read as UTF-8"):
        load_corpus(tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")


def test_cache_reuses_and_sees_in_place_edits(tmp_path: Path) -> None:
    cache = CorpusCache()
    p = write(tmp_path, "a.txt", "first")
    c1 = cache.load(tmp_path)
    assert cache.load(tmp_path) is c1
    p.write_text("second version", encoding="utf-8")
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    c2 = cache.load(tmp_path)
    assert c2 is not c1 and c2["a"] == "second version"
    write(tmp_path, "b.txt", "new file")
    assert set(cache.load(tmp_path)) == {"a", "b"}
