"""The judge on any OpenAI-compatible ``/chat/completions`` endpoint (``judge.kind:
openai``, the default), over an ``httpx.AsyncClient`` (so the httpx instrumentation
traces each call beneath the layer's span). See ``gateway.upstream.judge``.

**Structured output.** A call with ``schema`` is asked, per model, down a chain of
:data:`STRUCTURED_MODES` — ``json_schema``
(``response_format: {type: json_schema, json_schema: {name, schema, strict: true}}``:
OpenAI, vLLM, llama.cpp's server; :func:`~gateway.upstream._judge_common.strict_schema`
drops ``maxLength``, which OpenAI's strict subset does not list) → ``json_object``
(``{type: json_object, schema}``: llama-cpp-python and llama.cpp constrain decoding to
the schema, others give JSON mode) → ``prompt`` (no ``response_format``: the prompt
asks, the layer repairs). The chain is walked once per judge and model, and
remembered for the process: a mode is dropped when an error answer (4xx, or
llama-cpp-python's 500) names ``response_format`` / ``json_schema`` (that call is
then re-sent in the next mode), or when a reply that was not cut at ``max_tokens`` is
not JSON (the server accepted the field and ignored it). ``judge.structured_output``
pins a mode instead.

**``n``.** A server that returns fewer choices than ``n`` is asked for
the rest concurrently; one that refuses ``n`` with an error (llama.cpp's server:
HTTP 500 "Only one completion choice is allowed") is asked ``n`` single times, and
remembered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from gateway.layers.base import JudgeError, JudgeReply
from gateway.upstream._capped_httpx import capped_transport
from gateway.upstream._judge_common import Ask, CachingJudge, concurrently, strict_schema

if TYPE_CHECKING:
    from gateway.settings import JudgeConfig

__all__ = ["STRUCTURED_MODES", "OpenAIJudge"]

log = logging.getLogger("gateway.judge")

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
"""How an OpenAI-compatible judge is asked for a reply schema, best first."""

_FORMAT_WORDS = (b"response_format", b"json_schema")
"""An error answer naming one of these refused the structured-output request."""


class _Refused(JudgeError):
    """An HTTP error answer; ``names_format``: its body names the structured-output
    field (the answer's text itself is never kept)."""

    def __init__(self, status: int, names_format: bool) -> None:
        super().__init__(f"judge answered HTTP {status}")
        self.status, self.names_format = status, names_format


def _is_json(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text.strip()), dict | list)
    except orjson.JSONDecodeError:
        return False


def _response_format(mode: str, ask: Ask) -> dict[str, Any] | None:
    if ask.schema is None or mode == "prompt":
        return None
    if mode == "json_schema":  # OpenAI strict: its documented subset only
        return {"type": "json_schema", "json_schema": {
            "name": ask.schema_name, "schema": strict_schema(ask.schema), "strict": True}}
    return {"type": "json_object", "schema": ask.schema}  # a grammar: maxLength holds


class OpenAIJudge(CachingJudge):
    def __init__(self, config: JudgeConfig, base_url: str, api_key: str | None,
                 client: httpx.AsyncClient | None = None) -> None:
        super().__init__(config)
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._modes: dict[str, int] = {}
        self._settled: set[str] = set()
        self._finding: dict[str, asyncio.Lock] = {}
        self._single: set[str] = set()
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(
            timeout=config.timeout, headers=headers,
            transport=capped_transport(httpx, config.max_response_bytes, limits=httpx.Limits(
                max_connections=config.max_concurrency,
                max_keepalive_connections=config.max_concurrency)))

    @property
    def client(self) -> httpx.AsyncClient:
        return self._client

    @property
    def modes(self) -> dict[str, str]:
        """The structured-output mode in use per model asked so far (see the module
        docstring)."""
        return {m: STRUCTURED_MODES[i] for m, i in self._modes.items()}

    def _mode(self, model: str) -> str:
        pinned = self.config.structured_output
        if pinned != "auto":
            self._settled.add(model)
            return pinned
        return STRUCTURED_MODES[self._modes.setdefault(model, 0)]

    def _drop(self, model: str, mode: str, why: str) -> bool:
        """Stop using ``mode`` for ``model`` (auto only); False when nothing is left."""
        if self.config.structured_output != "auto" or mode == "prompt":
            return False
        nxt = STRUCTURED_MODES.index(mode) + 1
        if self._modes.get(model, 0) < nxt:
            self._modes[model] = nxt
            if nxt == len(STRUCTURED_MODES) - 1:
                self._settled.add(model)  # nothing left to find out
            log.info("judge model %s: structured output %s not usable (%s); now %s",
                     model, mode, why, STRUCTURED_MODES[nxt])
        return True

    async def _call(self, messages: list[Mapping[str, Any]], model: str, ask: Ask,
                    n: int) -> JudgeReply:
        if n > 1 and model in self._single:
            return await concurrently([self._ask(messages, model, ask, 1) for _ in range(n)])
        try:
            reply = await self._ask(messages, model, ask, n)
        except _Refused:
            if n == 1:
                raise
            # Some servers refuse `n` outright (llama.cpp's: HTTP 500): n single calls.
            reply = await concurrently([self._ask(messages, model, ask, 1) for _ in range(n)])
            self._single.add(model)
            return reply
        if len(reply.texts) < n:  # many servers ignore `n`: ask for the rest, at once
            more = await concurrently([self._ask(messages, model, ask, 1)
                                        for _ in range(n - len(reply.texts))])
            reply.texts += more.texts
            reply.input_tokens += more.input_tokens
            reply.output_tokens += more.output_tokens
            reply.truncated = reply.truncated or more.truncated
        return reply

    async def _ask(self, messages: list[Mapping[str, Any]], model: str, ask: Ask,
                   n: int) -> JudgeReply:
        """One request in the model's structured-output mode. Until a mode is settled
        for the model, schema requests go one at a time (concurrent first calls wait
        for the one finding out, rather than all being refused)."""
        if ask.schema is None or model in self._settled:
            return await self._try_modes(messages, model, ask, n)
        async with self._finding.setdefault(model, asyncio.Lock()):
            return await self._try_modes(messages, model, ask, n)

    async def _try_modes(self, messages: list[Mapping[str, Any]], model: str, ask: Ask,
                         n: int) -> JudgeReply:
        """Walk down the chain while the endpoint refuses the mode (the request is then
        sent again in the next one)."""
        while True:
            mode = self._mode(model) if ask.schema is not None else "prompt"
            try:
                reply = await self._post(messages, model, ask, n, _response_format(mode, ask))
            except _Refused as exc:
                if exc.names_format and self._drop(model, mode, f"HTTP {exc.status}"):
                    continue
                raise
            if mode == "prompt" or reply.truncated:
                pass
            elif all(_is_json(t) for t in reply.texts):
                self._settled.add(model)
            else:
                self._drop(model, mode, "the reply was not JSON")
            return reply

    async def _post(self, messages: list[Mapping[str, Any]], model: str, ask: Ask, n: int,
                    response_format: dict[str, Any] | None) -> JudgeReply:
        body: dict[str, Any] = {"model": model, "messages": messages,
                                "temperature": ask.temperature, "max_tokens": ask.max_tokens,
                                "n": n}
        if response_format is not None:
            body["response_format"] = response_format
        try:
            async with self._sem:
                resp = await self._client.post(self.url, content=orjson.dumps(body),
                                               headers={"content-type": "application/json"})
        except httpx.TimeoutException as exc:
            raise JudgeError(f"judge timed out after {self.config.timeout}s") from exc
        except httpx.HTTPError as exc:
            raise JudgeError(f"judge request failed: {type(exc).__name__}") from exc
        if resp.status_code >= 400:
            head = resp.content[:65536].lower()
            raise _Refused(resp.status_code, any(w in head for w in _FORMAT_WORDS))
        try:
            data = orjson.loads(resp.content)
            choices = [c for c in data.get("choices") or () if isinstance(c, dict)]
            texts = [_choice_text(c) for c in choices]
        except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
            raise JudgeError(f"judge reply is not a chat completion "
                             f"({len(resp.content)} bytes)") from exc
        if not texts:
            raise JudgeError("judge reply has no choices")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return JudgeReply(texts=texts, input_tokens=_count(usage.get("prompt_tokens")),
                          output_tokens=_count(usage.get("completion_tokens")),
                          model=str(data.get("model") or model),
                          truncated=any(c.get("finish_reason") == "length" for c in choices))

    async def aclose(self) -> None:
        await self._client.aclose()


def _choice_text(choice: dict[str, Any]) -> str:
    message = choice.get("message") or {}
    return str(message.get("content") or "")


def _count(value: Any) -> int:
    """A token count from a reply's ``usage`` (anything else counts 0: a bad count must
    not fail a usable reply, nor reach an error message)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
