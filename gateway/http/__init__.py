"""HTTP in one place: the ASGI endpoints and what they need of HTTP.

- :mod:`~gateway.http.endpoints` — the endpoints of one app (chat completions,
  ``/v1/models``, every other ``/v1/*``), built by the lifespan, each request inside
  its trace;
- :mod:`~gateway.http.chat` — the chat completions front door: parse, authenticate,
  route, select a policy, then relay (:mod:`~gateway.http.relay`) or hand the
  request to the engine (``gateway.modes``);
- :mod:`~gateway.http.exchange` — one chat request on its way through
  (:class:`~gateway.http.exchange.ChatExchange`): the upstream call, and the
  response writers that own the disconnect watcher;
- :mod:`~gateway.http.forward` — the ``/v1/*`` relay, streaming both ways;
  :mod:`~gateway.http.models` — ``GET /v1/models`` across upstreams;
- :mod:`~gateway.http.asgi` — bounded body reads, response writers, the disconnect
  watcher; :mod:`~gateway.http.auth`, :mod:`~gateway.http.routes` — gateway keys and
  the routes a key may call; :mod:`~gateway.http.forward_path`,
  :mod:`~gateway.http.body_model` — what a forwarded request may be and where its
  model is; :mod:`~gateway.http.server_limits` — the server's own connection limits.

Plain ASGI, no framework on the hot path (measured: docs/benchmarks.md).
"""
