"""Load a source corpus directory: the texts citations are resolved against.

Files directly inside the directory (sorted; subdirectories are ignored):

- ``*.txt`` — one source; id = file stem.
- ``*.md`` — one source; id = file stem; optional YAML front matter
  (``---`` … ``---``) with ``id``, ``title``, ``url``, ``authority``,
  ``published``; otherwise the first ``# heading`` is the title.
- ``*.jsonl`` — one source per non-blank line:
  ``{"id", "text", optional "title", "url", "authority", "published"}``.
  Other keys are ignored.

``authority`` is one of seed 001's names (``government``, ``academic``, …,
``unknown``) or a number in [0, 1]; ``published`` an ISO date. Bad input raises
:class:`CorpusError` naming the file (and line, for JSONL), as does a source id
defined twice.

The result, :class:`Corpus`, *is* a ``Mapping[str, str]`` (id -> text), so it
can be passed wherever a plain corpus mapping is expected
(``LayerResources.corpus``), and carries per-source metadata in ``.meta``.
:func:`load_corpus` reads the directory every time; a :class:`CorpusCache` (one per
verification runtime) keys loaded corpora by the directory's and its files'
modification times and sizes (a directory's own mtime does not change when a file
is edited in place), so asking it per request or per reload is cheap and gives the
same object while nothing changed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import orjson
import yaml

from gateway.scoring.binding import AUTHORITY_WEIGHTS, parse_date

__all__ = ["Corpus", "CorpusCache", "CorpusError", "SourceMeta", "corpus_dir_problem",
           "load_corpus", "resolve_corpus_dir"]

_SUFFIXES = (".txt", ".md", ".jsonl")


class CorpusError(ValueError):
    """A corpus file could not be read; the message names the file (and line)."""


@dataclass(frozen=True, slots=True)
class SourceMeta:
    title: str | None = None
    url: str | None = None
    authority: str | float | None = None
    """Seed 001 authority name or a weight in [0, 1]; ``None`` = unknown."""
    published: str | None = None
    """ISO date as written in the source file."""
    origin: str = ""
    """``file`` or ``file:line`` the source came from."""


@dataclass(frozen=True, slots=True)
class Corpus(Mapping[str, str]):
    """Source id -> text, plus per-source :class:`SourceMeta` in ``meta``."""

    texts: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, SourceMeta] = field(default_factory=dict)
    directory: str | None = None

    def __getitem__(self, key: str) -> str:
        return self.texts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)


def resolve_corpus_dir(directory: str | os.PathLike[str], policy_file: Path | None) -> Path:
    """A policy's ``context.corpus_dir``: ``~`` expanded; a relative path is relative
    to the directory of ``policy_file`` (the current directory without one)."""
    path = Path(directory).expanduser()
    if not path.is_absolute() and policy_file is not None:
        path = policy_file.parent / path
    return path


def corpus_dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a corpus directory (``None``: it can)."""
    try:
        if not path.exists():
            return f"corpus directory {str(path)!r} not found"
        if not path.is_dir():
            return f"corpus directory {str(path)!r} is not a directory"
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        return f"cannot read corpus directory {str(path)!r}: {exc.strerror or exc}"
    return None


def load_corpus(directory: str | os.PathLike[str]) -> Corpus:
    """Load the corpus in ``directory`` (read now: :class:`CorpusCache` keeps them)."""
    path, _ = _signature(directory)
    return _load(str(path))


class CorpusCache:
    """Loaded corpora, reused while their files are unchanged (bounded, LRU).

    Not thread-safe; one per verification runtime (it lives as long as the runtime).
    """

    def __init__(self, max_entries: int = 8) -> None:
        self._max = max_entries
        self._entries: dict[str, tuple[tuple[object, ...], Corpus]] = {}

    def load(self, directory: str | os.PathLike[str]) -> Corpus:
        """The corpus in ``directory``: the one loaded before while its signature (the
        files' names, modification times and sizes) is unchanged, else read now."""
        path, signature = _signature(directory)
        key = str(path)
        found = self._entries.pop(key, None)
        if found is not None and found[0] == signature:
            self._entries[key] = found  # most recently used last
            return found[1]
        corpus = _load(key)
        while len(self._entries) >= self._max:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (signature, corpus)
        return corpus


def _signature(directory: str | os.PathLike[str]) -> tuple[Path, tuple[object, ...]]:
    path = Path(directory).expanduser().resolve()
    if not path.is_dir():
        raise CorpusError(f"corpus directory {str(path)!r} does not exist or is not a directory")
    try:
        files = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
        signature = (path.stat().st_mtime_ns,) + tuple(
            (p.name, st.st_mtime_ns, st.st_size) for p in files if (st := p.stat()))
    except OSError as exc:
        raise CorpusError(f"cannot read corpus directory {str(path)!r}: {exc}") from exc
    return path, signature


def _load(directory: str) -> Corpus:
    texts: dict[str, str] = {}
    meta: dict[str, SourceMeta] = {}
    for p in sorted(Path(directory).iterdir()):
        if p.suffix not in _SUFFIXES or not p.is_file():
            continue
        try:
            raw = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CorpusError(f"{p}: cannot read as UTF-8 text: {exc}") from exc
        if p.suffix == ".jsonl":
            entries = list(_jsonl_entries(p, raw))
        elif p.suffix == ".md":
            entries = [_markdown_entry(p, raw)]
        else:
            entries = [(p.stem, raw.strip(), SourceMeta(origin=str(p)))]
        for sid, text, m in entries:
            if sid in texts:
                raise CorpusError(f"{m.origin}: duplicate source id {sid!r} "
                                  f"(first defined in {meta[sid].origin})")
            texts[sid] = text
            meta[sid] = m
    return Corpus(texts=texts, meta=meta, directory=directory)


def _meta(where: str, obj: Mapping[str, object]) -> SourceMeta:
    """Validate the optional metadata keys of one source."""
    def opt_str(key: str) -> str | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, date):  # YAML front matter parses bare dates
            return value.isoformat()
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise CorpusError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
        return str(value)

    authority = obj.get("authority")
    if authority is not None:
        if isinstance(authority, bool) or not isinstance(authority, str | int | float):
            raise CorpusError(f"{where}: 'authority' must be a name or a number in [0, 1]")
        if isinstance(authority, str) and authority.strip().lower() not in AUTHORITY_WEIGHTS:
            raise CorpusError(f"{where}: unknown authority {authority!r}; expected one of "
                              f"{', '.join(AUTHORITY_WEIGHTS)} or a number in [0, 1]")
        if isinstance(authority, int | float) and not 0.0 <= authority <= 1.0:
            raise CorpusError(f"{where}: authority {authority} is not in [0, 1]")
        if isinstance(authority, str):
            authority = authority.strip().lower()
    published = opt_str("published")
    if published is not None and parse_date(published) is None:
        raise CorpusError(f"{where}: 'published' {published!r} is not an ISO date")
    return SourceMeta(title=opt_str("title"), url=opt_str("url"), authority=authority,
                      published=published, origin=where)


def _jsonl_entries(p: Path, raw: str) -> Iterator[tuple[str, str, SourceMeta]]:
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{lineno}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise CorpusError(f"{where}: invalid JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise CorpusError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        sid, text = obj.get("id"), obj.get("text")
        if isinstance(sid, bool) or not isinstance(sid, str | int) or not str(sid).strip():
            raise CorpusError(f"{where}: missing or invalid 'id' (a non-empty string)")
        if not isinstance(text, str):
            raise CorpusError(f"{where}: missing or invalid 'text' (a string)")
        yield str(sid).strip(), text.strip(), _meta(where, obj)


def _markdown_entry(p: Path, raw: str) -> tuple[str, str, SourceMeta]:
    where = str(p)
    front: Mapping[str, object] = {}
    body = raw
    if raw.startswith("---"):
        head, sep, rest = raw[3:].partition("\n---")
        if not sep:
            raise CorpusError(f"{where}: front matter opened with '---' is never closed")
        try:
            loaded = yaml.safe_load(head)
        except yaml.YAMLError as exc:
            raise CorpusError(f"{where}: invalid YAML front matter: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise CorpusError(f"{where}: front matter must be a mapping")
        front = loaded or {}
        body = rest.partition("\n")[2]
    m = _meta(where, front)
    if m.title is None:
        for line in body.splitlines():
            if line.startswith("# "):
                m = SourceMeta(line[2:].strip(), m.url, m.authority, m.published, m.origin)
                break
    sid = front.get("id")
    return (str(sid) if sid is not None else p.stem), body.strip(), m
