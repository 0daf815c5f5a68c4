"""The audit dashboard: server-rendered pages over the audit store.

- :mod:`~gateway.dashboard.data` — the queries behind each page;
- :mod:`~gateway.dashboard.svg` — charts as SVG, drawn on the server;
- :mod:`~gateway.dashboard.pages` — the HTML;
- :mod:`~gateway.dashboard.app` — the starlette app (``gateway audit serve``);
- :mod:`~gateway.dashboard.mount` — the same app on the gateway, behind a gateway key
  (``audit.dashboard``).

It reads the audit (``gateway.audit``) and never writes it; it knows nothing of
verification or the request path.
"""
