"""The index of the runtime's corpus, as the evidence-gathering layers keep it.

A layer searches the configured corpus (``LayerResources.corpus``, or a request's own)
with a :class:`~gateway.text.index.TextIndex`; building one takes a while for a large
corpus, so it is built off the event loop and kept while the layer sees the same corpus
object (the runtime swaps in a new one when the corpus directory changes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from gateway.text.index import TextIndex, build_index

__all__ = ["CorpusIndex"]


class CorpusIndex:
    """One layer instance's index of the last corpus it was asked about."""

    def __init__(self) -> None:
        self._cached: tuple[Mapping[str, str], TextIndex] | None = None

    async def of(self, corpus: Mapping[str, str]) -> TextIndex:
        """The index of ``corpus``: the kept one if ``corpus`` is the same object, else
        built (in a thread) and kept."""
        cached = self._cached
        if cached is None or cached[0] is not corpus:
            index = await asyncio.to_thread(build_index, list(corpus.items()))
            cached = self._cached = (corpus, index)
        return cached[1]
