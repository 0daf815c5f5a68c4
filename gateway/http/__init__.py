"""HTTP in one place: what the ASGI endpoints need of HTTP.

- :mod:`~gateway.http.asgi` — bounded body reads, response writers, the disconnect
  watcher; :mod:`~gateway.http.auth`, :mod:`~gateway.http.routes` — gateway keys and
  the routes a key may call; :mod:`~gateway.http.forward_path`,
  :mod:`~gateway.http.body_model` — what a forwarded request may be and where its
  model is; :mod:`~gateway.http.server_limits` — the server's own connection limits.

Plain ASGI, no framework on the hot path (measured: docs/benchmarks.md).
"""
