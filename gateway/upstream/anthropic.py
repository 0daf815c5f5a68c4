"""An Anthropic upstream behind the OpenAI-shaped upstream interface.

:class:`AnthropicUpstreamClient` is an :class:`~gateway.upstream.openai.OpenAIUpstreamClient`
(same aiohttp pool, same ``open``/``aclose``, same error conversion) whose
:meth:`~AnthropicUpstreamClient.send` speaks Anthropic's Messages API on the wire
and hands back OpenAI-shaped responses, so the proxy and the verification engine
do not know the difference:

- ``POST /chat/completions`` -> ``POST {base_url}/messages``; ``read()`` gives a
  ``chat.completion``, ``iter_chunks()`` gives ``chat.completion.chunk`` SSE bytes
  translated as Anthropic's events arrive;
- ``POST /responses`` -> the same, as a chat completion and back
  (:mod:`gateway.upstream.responses_bridge`: Anthropic has no Responses API);
- ``GET /models`` -> ``GET {base_url}/models`` as an OpenAI model list;
- ``POST /messages`` and ``/messages/count_tokens`` (:data:`NATIVE_PATHS`, the
  gateway's Messages front door) -> sent and answered as they are, untranslated;
- any other path -> a local 404 in the OpenAI error shape (nothing is sent).

Anthropic errors come back in the OpenAI error shape with the same status (529 ->
503), response headers such as ``retry-after`` kept. The translation itself is in
:mod:`gateway.upstream.openai_anthropic` (requests) and
:mod:`gateway.upstream.anthropic_openai` (responses, errors, streams).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Literal

import aiohttp
import orjson

from gateway.errors import (
    UpstreamError,
    UpstreamTooLarge,
    UpstreamTruncated,
)
from gateway.settings import DEFAULT_MAX_RESPONSE_BYTES, UpstreamConfig
from gateway.upstream import anthropic_openai as to_openai
from gateway.upstream import openai_anthropic as to_anthropic
from gateway.upstream.base import (
    RawHeaders,
    UpstreamResponse,
    read_chunks,
    too_large,
    truncated,
)
from gateway.upstream.openai import OpenAIUpstreamClient
from gateway.upstream.responses_bridge import read_json_object, send_via_chat
from gateway.upstream.scrub import Secrets

__all__ = ["NATIVE_PATHS", "AnthropicResponse", "AnthropicUpstreamClient"]

# Client request headers worth sending to Anthropic (the rest are the OpenAI SDK's).
NATIVE_PATHS = frozenset({"/messages", "/messages/count_tokens"})
"""Paths sent as they are, in Anthropic's own API (``POST /v1/messages`` and its
``count_tokens`` through the gateway's Messages front door), answered as they come."""

_FORWARD = frozenset({b"anthropic-beta", b"traceparent", b"tracestate", b"baggage"})
_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"

Mode = Literal["chat", "stream", "models", "error", "static"]


class AnthropicResponse(UpstreamResponse):
    """An :class:`UpstreamResponse` whose body is translated to OpenAI's shapes.

    ``raw`` is the Anthropic response (None for an answer made locally, ``body``).
    """

    __slots__ = ("_body", "_include_usage", "_mode", "_model", "_raw", "headers", "max_bytes",
                 "status")

    def __init__(self, raw: UpstreamResponse | None, mode: Mode, *, status: int | None = None,
                 body: bytes = b"", include_usage: bool = False, model: str = "") -> None:
        self._raw = raw
        self._include_usage = include_usage
        self._model = model
        self._body: bytes | None = body if raw is None else None
        self.max_bytes = raw.max_bytes if raw is not None else DEFAULT_MAX_RESPONSE_BYTES
        if raw is not None and raw.status >= 400:
            mode = "error"
        elif mode == "chat" and raw is not None and raw.content_type.startswith(
                "text/event-stream"):
            mode = "stream"
        self._mode: Mode = mode
        self.status = to_openai.map_status(raw.status) if raw is not None else (status or 200)
        headers: RawHeaders = [h for h in raw.headers if h[0] != b"content-type"] \
            if raw is not None else []
        if raw is not None and not any(k == b"x-request-id" for k, _ in headers):
            headers += [(b"x-request-id", v) for k, v in headers if k == b"request-id"]
        headers.append((b"content-type", (_SSE if mode == "stream" else _JSON).encode()))
        self.headers = headers

    @property
    def content_type(self) -> str:
        return _SSE if self._mode == "stream" else _JSON

    def header(self, name: str) -> str | None:
        key = name.lower().encode("latin-1")
        for k, v in self.headers:
            if k == key:
                return v.decode("latin-1")
        return None

    def too_large(self) -> UpstreamTooLarge:
        return self._raw.too_large() if self._raw is not None \
            else too_large("anthropic", self.max_bytes)

    def truncated(self) -> UpstreamTruncated:
        return self._raw.truncated() if self._raw is not None else truncated("anthropic")

    async def read(self) -> bytes:
        if self._body is not None:
            return self._body
        if self._mode == "stream":  # translated as it arrives: the output is counted
            self._body = await read_chunks(self)
            return self._body
        assert self._raw is not None
        data = await self._raw.read()
        if self._mode == "error":
            _, body = to_openai.error_to_openai(self._raw.status, data)
            self._body = orjson.dumps(body)
            return self._body
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise UpstreamError("anthropic upstream answered with a body that is not JSON")
        out = (to_openai.models_to_openai(parsed) if self._mode == "models"
               else to_openai.message_to_chat(parsed))
        self._body = orjson.dumps(out)
        return self._body

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        if self._mode != "stream" or self._raw is None:
            yield await self.read()
            return
        translator = to_openai.StreamTranslator(include_usage=self._include_usage,
                                                model=self._model)
        async for chunk in self._raw.iter_chunks():
            out = translator.feed(chunk)
            if out:
                yield out
            if translator.done or translator.error is not None:
                break
            if translator.pending > self.max_bytes:  # one event that never ends
                raise self.too_large()
        translator.finish()  # raises on an error event or a stream cut short

    def release(self) -> None:
        if self._raw is not None:
            self._raw.release()

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()


class AnthropicUpstreamClient(OpenAIUpstreamClient):
    """An upstream of ``kind: anthropic``. Create with :meth:`open`, close with :meth:`aclose`.

    The key goes out as ``x-api-key``: the upstream's own (``api_key_env``) in
    gateway-keys mode, the client's bearer token in forward mode.
    """

    def __init__(self, config: UpstreamConfig, session: aiohttp.ClientSession,
                 secrets: Secrets | None = None) -> None:
        super().__init__(config, session, secrets)
        self._api_key: str | None = config.api_key() or None

    @property
    def has_own_key(self) -> bool:
        return self._api_key is not None

    def build_headers(self, client_headers: Iterable[tuple[bytes, bytes]],
                      use_own_key: bool, extra: RawHeaders | None = None) -> dict[str, str]:
        out = {"anthropic-version": to_anthropic.ANTHROPIC_VERSION, "content-type": _JSON}
        key = self._api_key if use_own_key else None
        for k, v in client_headers:
            if k in _FORWARD:
                out[k.decode("latin-1")] = v.decode("latin-1")
            elif not use_own_key and k == b"authorization":
                scheme, _, token = v.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and token.strip():
                    key = key or token.strip()
            elif not use_own_key and k == b"x-api-key":
                key = v.decode("latin-1")  # an explicit Anthropic key wins over the bearer
        if key:
            out["x-api-key"] = key
        for k, v in extra or ():
            out[k.decode("latin-1")] = v.decode("latin-1")
        return out

    async def send(self, method: str, path: str, headers: dict[str, str],
                   body: bytes | AsyncIterator[bytes] | None = None,
                   query: str = "") -> UpstreamResponse:
        """Translate and send one OpenAI-style request; return once headers arrive."""
        if path == "/chat/completions" and method == "POST":
            payload = await read_json_object(body)
            request = to_anthropic.chat_to_messages(payload)
            raw = await super().send("POST", "/messages", headers, orjson.dumps(request))
            return AnthropicResponse(raw, "chat",
                                     include_usage=to_anthropic.include_usage(payload),
                                     model=str(payload.get("model") or ""))
        if path == "/responses" and method == "POST":  # through chat completions
            return await send_via_chat(self.send, headers, body, query)
        if path == "/models" and method == "GET":
            raw = await super().send("GET", "/models", headers, None, "limit=1000")
            return AnthropicResponse(raw, "models")
        if method == "POST" and path in NATIVE_PATHS:  # the Messages front door: as is
            return await super().send(method, path, headers, body, query)
        if not isinstance(body, (bytes, type(None))):
            async for _ in body:  # drain an upload we will not send
                pass
        body_404 = to_anthropic.unsupported_path(f"{method} /v1{path}")
        return AnthropicResponse(None, "static", status=404, body=orjson.dumps(body_404))
