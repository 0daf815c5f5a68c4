"""The upstream client keeps no cookies: a ``Set-Cookie`` an upstream sends in answer to
one client's request must never ride along on another client's request (the gateway
serves many callers over one pooled session per upstream). A client's own ``Cookie``
header is forwarded as it is, like its other headers."""

from __future__ import annotations

import asyncio

from gateway.settings import UpstreamConfig
from gateway.upstream.openai import OpenAIUpstreamClient

ANSWER = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
          b"set-cookie: session=upstream-set; Path=/\r\ncontent-length: 2\r\n\r\n{}")


async def _serve(cookies: list[str | None]) -> asyncio.Server:
    """An upstream on 127.0.0.1 recording each request's Cookie header (None: none)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                lowered = {k.lower(): v for k, v in headers.items()}
                await reader.readexactly(int(lowered.get("content-length", "0")))
                cookies.append(lowered.get("cookie"))
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_a_cookie_an_upstream_sets_is_never_sent_on_a_later_request() -> None:
    async def main() -> list[str | None]:
        cookies: list[str | None] = []
        server = await _serve(cookies)
        port = server.sockets[0].getsockname()[1]
        # A host name, not an IP: aiohttp's default jar keeps cookies only for names.
        client = OpenAIUpstreamClient.open(
            UpstreamConfig(name="u", base_url=f"http://localhost:{port}/v1"))
        try:
            for headers in ({}, {}, {"cookie": "mine=1"}):
                resp = await client.send("POST", "/chat/completions",
                                         {"content-type": "application/json", **headers},
                                         b"{}")
                assert resp.status == 200
                await resp.read()
                resp.release()
        finally:
            await client.aclose()
            server.close()
            await server.wait_closed()
        return cookies

    assert asyncio.run(main()) == [None, None, "mine=1"]
