"""Judges: the models that model-based verification layers call.

Two kinds, one contract (:class:`gateway.layers.base.Judge`):

- :class:`OpenAIJudge` — any OpenAI-compatible ``/chat/completions`` endpoint,
  over an ``httpx.AsyncClient`` (so the httpx instrumentation traces each call
  beneath the layer's span). By default this is the first upstream.
- :class:`AnthropicJudge` — Anthropic's Messages API through the ``anthropic`` SDK.
  That API accepts ``temperature`` 0–1 (OpenAI's 0–2) and has no ``n``: the judge
  clamps the temperature into 0–1 (as the ``anthropic`` upstream does) and asks
  ``n`` times for ``n`` samples.

Both count tokens and cost (``price_per_1k_*``), bound concurrency, and cache
temperature-0 replies for identical prompts (``JudgeReply.cached``). Library
errors become :class:`~gateway.layers.base.JudgeError` here, at the boundary.

**Structured output.** A call may carry ``schema`` (a JSON Schema in the strict
subset, see ``gateway.layers._json_reply``) and ``schema_name``. The Anthropic
judge forces a tool call whose ``input_schema`` is the schema. The OpenAI judge
asks, per model, down a chain of :data:`STRUCTURED_MODES` — ``json_schema``
(``response_format: {type: json_schema, json_schema: {name, schema, strict: true}}``:
OpenAI, vLLM, llama.cpp's server; :func:`strict_schema` drops ``maxLength``, which
OpenAI's strict subset does not list, as it does for Anthropic's ``input_schema``)
→ ``json_object`` (``{type: json_object, schema}``:
llama-cpp-python and llama.cpp constrain decoding to the schema, others give JSON
mode) → ``prompt`` (no ``response_format``: the prompt asks, the layer repairs).
The chain is walked once per judge and model, and remembered for the process: a
mode is dropped when an error answer (4xx, or llama-cpp-python's 500) names
``response_format`` / ``json_schema`` (that call is then re-sent in the next mode),
or when a reply that was not cut at ``max_tokens`` is not JSON (the server accepted
the field and ignored it). ``judge.structured_output`` pins a mode instead.

**``n``.** A server that returns fewer choices than ``n`` is asked for
the rest concurrently; one that refuses ``n`` with an error (llama.cpp's server:
HTTP 500 "Only one completion choice is allowed") is asked ``n`` single times, and
remembered.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
import orjson
from cachetools import LRUCache

from gateway.layers.base import Judge, JudgeError, JudgeReply, reply_served
from gateway.sources.context import message_text
from gateway.upstream._capped_httpx import capped_transport

if TYPE_CHECKING:
    from gateway.settings import JudgeConfig, Settings
    from gateway.telemetry import Telemetry

__all__ = ["ANTHROPIC_MAX_TEMPERATURE", "STRUCTURED_MODES", "AnthropicJudge", "OpenAIJudge",
           "create_judge", "strict_schema"]

log = logging.getLogger("gateway.judge")

ANTHROPIC_MAX_TEMPERATURE = 1.0
"""The Messages API rejects a ``temperature`` above this (OpenAI's limit is 2)."""

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
"""How an OpenAI-compatible judge is asked for a reply schema, best first."""

_FORMAT_WORDS = (b"response_format", b"json_schema")
"""An error answer naming one of these refused the structured-output request."""

class _CachingJudge:
    """Shared pricing, concurrency bound and temperature-0 cache."""

    accepts_schema: ClassVar[bool] = True
    """``complete`` takes ``schema`` / ``schema_name`` (see ``gateway.layers.base.Judge``)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._sem = asyncio.Semaphore(config.max_concurrency)
        self._cache: LRUCache[str, JudgeReply] | None = (
            LRUCache(config.cache_size) if config.cache_size else None)

    def _price(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.config.price_per_1k_input
                + output_tokens * self.config.price_per_1k_output) / 1000

    async def complete(self, messages: Sequence[Mapping[str, Any]], *,
                       temperature: float = 0.0, max_tokens: int = 512, n: int = 1,
                       model: str | None = None, override: str | None = None,
                       schema: Mapping[str, Any] | None = None,
                       schema_name: str = "reply") -> JudgeReply:
        name = override or self.config.model or model
        if not name:
            raise JudgeError("no judge model: set judge.model or pass the request's model")
        key = None
        if self._cache is not None and temperature == 0.0:
            key = hashlib.sha256(orjson.dumps(
                [name, list(messages), max_tokens, n, schema, schema_name],
                option=orjson.OPT_SORT_KEYS)).hexdigest()
            hit = self._cache.get(key)
            if hit is not None:
                reply_served(self, key)
                return JudgeReply(texts=list(hit.texts), cost=0.0, cached=True, model=hit.model,
                                  truncated=hit.truncated)
        ask = _Ask(temperature, max_tokens, dict(schema) if schema is not None else None,
                   schema_name)
        reply = await self._call(list(messages), name, ask, n)
        del reply.texts[n:]  # some servers return more choices than asked: n means n
        reply.cost = self._price(reply.input_tokens, reply.output_tokens)
        if key is not None and self._cache is not None:
            self._cache[key] = reply
            reply_served(self, key)
        return reply

    def forget(self, key: str) -> None:
        """Drop one cached reply (see :func:`gateway.layers.base.uncache_on_error`)."""
        if self._cache is not None:
            self._cache.pop(key, None)

    async def _call(self, messages: list[Mapping[str, Any]], model: str, ask: _Ask,
                    n: int) -> JudgeReply:
        """The reply to one ``complete``: one or more HTTP requests, each holding
        ``self._sem`` (``max_concurrency`` bounds requests in flight, not calls)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


class _Ask:
    """What one ``complete`` asks besides the messages (the same for every request
    it makes)."""

    __slots__ = ("max_tokens", "schema", "schema_name", "temperature")

    def __init__(self, temperature: float, max_tokens: int, schema: dict[str, Any] | None,
                 schema_name: str) -> None:
        self.temperature, self.max_tokens = temperature, max_tokens
        self.schema, self.schema_name = schema, schema_name


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


_GRAMMAR_ONLY = frozenset({"maxLength", "minLength"})
"""Schema keywords a grammar-constrained server enforces (llama.cpp's and
llama-cpp-python's schema-to-grammar) but OpenAI's strict ``json_schema`` and
Anthropic's tool ``input_schema`` do not list as supported: stripped there."""


def strict_schema(schema: Any) -> Any:
    """``schema`` without the :data:`_GRAMMAR_ONLY` keywords, at every depth (a
    property *named* ``maxLength`` is kept: only keyword positions are walked)."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _GRAMMAR_ONLY:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "$defs", "definitions"):
            out[key] = ({name: strict_schema(sub) for name, sub in value.items()}
                        if isinstance(value, dict) and key in ("$defs", "definitions")
                        else strict_schema(value))
        else:
            out[key] = value
    return out


def _response_format(mode: str, ask: _Ask) -> dict[str, Any] | None:
    if ask.schema is None or mode == "prompt":
        return None
    if mode == "json_schema":  # OpenAI strict: its documented subset only
        return {"type": "json_schema", "json_schema": {
            "name": ask.schema_name, "schema": strict_schema(ask.schema), "strict": True}}
    return {"type": "json_object", "schema": ask.schema}  # a grammar: maxLength holds


async def _concurrently(calls: list[Coroutine[Any, Any, JudgeReply]]) -> JudgeReply:
    """Await ``calls`` at once and merge their replies (texts in call order). The first
    failure cancels the rest and is raised as itself."""
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in calls]
    except ExceptionGroup as eg:  # TaskGroup wraps: callers handle JudgeError
        failed = eg.exceptions[0]
    if failed is not None:
        raise failed  # as itself, with its own __cause__ (the HTTP or SDK error)
    replies = [t.result() for t in tasks]
    merged = JudgeReply(texts=[], model=replies[0].model if replies else "")
    for r in replies:
        merged.texts += r.texts
        merged.input_tokens += r.input_tokens
        merged.output_tokens += r.output_tokens
        merged.truncated = merged.truncated or r.truncated
    return merged


class OpenAIJudge(_CachingJudge):
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

    async def _call(self, messages: list[Mapping[str, Any]], model: str, ask: _Ask,
                    n: int) -> JudgeReply:
        if n > 1 and model in self._single:
            return await _concurrently([self._ask(messages, model, ask, 1) for _ in range(n)])
        try:
            reply = await self._ask(messages, model, ask, n)
        except _Refused:
            if n == 1:
                raise
            # Some servers refuse `n` outright (llama.cpp's: HTTP 500): n single calls.
            reply = await _concurrently([self._ask(messages, model, ask, 1) for _ in range(n)])
            self._single.add(model)
            return reply
        if len(reply.texts) < n:  # many servers ignore `n`: ask for the rest, at once
            more = await _concurrently([self._ask(messages, model, ask, 1)
                                        for _ in range(n - len(reply.texts))])
            reply.texts += more.texts
            reply.input_tokens += more.input_tokens
            reply.output_tokens += more.output_tokens
            reply.truncated = reply.truncated or more.truncated
        return reply

    async def _ask(self, messages: list[Mapping[str, Any]], model: str, ask: _Ask,
                   n: int) -> JudgeReply:
        """One request in the model's structured-output mode. Until a mode is settled
        for the model, schema requests go one at a time (concurrent first calls wait
        for the one finding out, rather than all being refused)."""
        if ask.schema is None or model in self._settled:
            return await self._try_modes(messages, model, ask, n)
        async with self._finding.setdefault(model, asyncio.Lock()):
            return await self._try_modes(messages, model, ask, n)

    async def _try_modes(self, messages: list[Mapping[str, Any]], model: str, ask: _Ask,
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

    async def _post(self, messages: list[Mapping[str, Any]], model: str, ask: _Ask, n: int,
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


class AnthropicJudge(_CachingJudge):
    """Anthropic's Messages API at API version ``2023-06-01``, as the ``anthropic``
    upstream speaks it. The ``anthropic`` SDK 2.x sends ``2026-10-21`` by default,
    which rejects ``temperature`` (any value, 400), and its ``messages.create`` has no
    ``temperature`` argument (a ``TypeError``); the judge needs temperature (0 for
    stable, cacheable verdicts, > 0 for sampling), so it pins the version and sends
    ``temperature`` in the body. The key also goes out as that version's
    ``x-api-key`` (the SDK 2.x sends only ``Authorization: Bearer``)."""

    def __init__(self, config: JudgeConfig, api_key: str | None,
                 base_url: str | None = None) -> None:
        super().__init__(config)
        import anthropic

        from gateway.upstream.openai_anthropic import ANTHROPIC_VERSION

        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self._anthropic = anthropic
        import httpx2  # the SDK's own httpx fork

        http = httpx2.AsyncClient(timeout=config.timeout, transport=capped_transport(
            httpx2, config.max_response_bytes, limits=httpx2.Limits(
                max_connections=config.max_concurrency,
                max_keepalive_connections=config.max_concurrency)))
        self.http = http
        """The SDK's HTTP client (traced like the OpenAI judge's, see :func:`create_judge`)."""
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url,
                                                timeout=config.timeout, max_retries=0,
                                                default_headers=headers, http_client=http)

    async def _call(self, messages: list[Mapping[str, Any]], model: str, ask: _Ask,
                    n: int) -> JudgeReply:
        # The Messages API has no system/developer role: their text is the top-level system.
        system = "\n\n".join(message_text(m) for m in messages
                             if m.get("role") in ("system", "developer"))
        turns = [{"role": m["role"], "content": message_text(m)} for m in messages
                 if m.get("role") in ("user", "assistant")]
        # A layer may ask for up to 2 (OpenAI's range); Anthropic rejects more than 1.
        temperature = min(max(ask.temperature, 0.0), ANTHROPIC_MAX_TEMPERATURE)
        kwargs: dict[str, Any] = {"model": model, "max_tokens": ask.max_tokens,
                                  "messages": turns, "extra_body": {"temperature": temperature}}
        if system:
            kwargs["system"] = system
        if ask.schema is not None:  # a forced tool call: its input follows the schema
            kwargs["tools"] = [{"name": ask.schema_name,
                                "input_schema": strict_schema(ask.schema),
                                "description": "Record your reply."}]
            kwargs["tool_choice"] = {"type": "tool", "name": ask.schema_name}
        if n == 1:
            return await self._create(kwargs, model)
        # The Messages API has no `n`: n requests, in flight together (each under a slot).
        return await _concurrently([self._create(kwargs, model) for _ in range(n)])

    async def _create(self, kwargs: dict[str, Any], model: str) -> JudgeReply:
        try:
            async with self._sem:
                msg = await self._client.messages.create(**kwargs)
        except self._anthropic.APIError as exc:
            raise JudgeError(f"anthropic judge failed: {type(exc).__name__}") from exc
        tool = next((b for b in msg.content if getattr(b, "type", "") == "tool_use"), None)
        text = (orjson.dumps(getattr(tool, "input", None)).decode() if tool is not None
                else "".join(getattr(b, "text", "") for b in msg.content))
        return JudgeReply(texts=[text], input_tokens=msg.usage.input_tokens,
                          output_tokens=msg.usage.output_tokens, model=model,
                          truncated=getattr(msg, "stop_reason", None) == "max_tokens")

    async def aclose(self) -> None:
        await self._client.close()


def create_judge(settings: Settings, telemetry: Telemetry | None = None) -> Judge | None:
    """The configured judge, or None when there is nothing to call."""
    import os

    cfg = settings.judge
    if cfg.base_url:
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        base_url: str = cfg.base_url
        kind = cfg.kind or "openai"
    else:
        upstream = next((u for u in settings.upstreams if u.name == cfg.upstream),
                        None) if cfg.upstream else (settings.upstreams[0]
                                                    if settings.upstreams else None)
        if upstream is None:
            return None
        key, base_url = upstream.api_key(), upstream.base_url
        kind = cfg.kind or upstream.kind
    if kind == "anthropic":
        # The SDK adds /v1/messages itself; our base URLs include /v1.
        root = base_url.rstrip("/").removesuffix("/v1")
        anthropic_judge = AnthropicJudge(cfg, key, root)
        if telemetry is not None:  # its HTTP spans, as the OpenAI judge's
            telemetry.instrument_httpx(anthropic_judge.http)
        return anthropic_judge
    judge = OpenAIJudge(cfg, base_url, key)
    if telemetry is not None:
        telemetry.instrument_httpx(judge.client)
    return judge
