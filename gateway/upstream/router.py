"""Which configured upstream serves a model: the routing table of one gateway."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gateway.errors import ModelNotFound
from gateway.upstream.base import UpstreamClient

__all__ = ["Upstreams"]


class Upstreams:
    """The open upstream clients, in configuration order (the first whose ``models``
    globs match a model serves it), and how requests authenticate to them."""

    def __init__(self, clients: Sequence[UpstreamClient], *, use_own_key: bool) -> None:
        self.clients = list(clients)
        self.use_own_key = use_own_key
        """Gateway-keys mode: each upstream's own key replaces the client's credentials."""

    def __iter__(self) -> Iterator[UpstreamClient]:
        return iter(self.clients)

    def __len__(self) -> int:
        return len(self.clients)

    def route(self, model: str) -> UpstreamClient:
        """The upstream serving ``model``, else :class:`ModelNotFound` (404)."""
        for client in self.clients:
            if client.config.matches(model):
                return client
        raise ModelNotFound(f"The model '{model}' does not exist or no upstream serves it.",
                            param="model")

    def routes_to(self, model: str, client: UpstreamClient) -> bool:
        try:
            return self.route(model) is client
        except ModelNotFound:
            return False

    def default(self) -> UpstreamClient:
        """The first upstream (a request whose model is unknown goes there)."""
        if not self.clients:
            raise ModelNotFound("no upstream is configured")
        return self.clients[0]

    def model_blind(self) -> bool:
        """Whether every model routes to the first upstream (a ``*`` in its ``models``)."""
        return bool(self.clients) and "*" in self.clients[0].config.models

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
