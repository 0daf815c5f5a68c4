"""A shipped test seam (like httpx's ``MockTransport``): fake upstreams and servers.

- :mod:`~gateway.testing.scripted` — :class:`~gateway.testing.scripted.ScriptedUpstream`,
  an OpenAI-compatible ASGI upstream whose replies, errors, latency and streams are
  scripted (the demo, ``gateway eval`` and the test suite run against it);
- :mod:`~gateway.testing.servers` — run any ASGI app under uvicorn on a free
  loopback port, in a thread (``ServerThread``).

Nothing in the gateway's request path imports this package.
"""
