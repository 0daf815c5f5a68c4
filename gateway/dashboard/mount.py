"""The dashboard mounted on the gateway, behind a gateway key.

``audit.dashboard.path`` (e.g. ``/audit``) serves the pages of
:mod:`gateway.dashboard.app` on the gateway's own port, to the gateway keys named in
``audit.dashboard.keys`` only: they show every tenant's records. A key is sent as
``Authorization: Bearer <key>`` (scripts, a proxy in front) or as the password of
HTTP Basic authentication (a browser asks for it; the user name is ignored). Anyone
else gets the OpenAI-shaped 401 (with ``WWW-Authenticate: Basic``) or 403. The
starlette app is built at the first request, so a gateway that never serves the
pages never imports them.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
from collections.abc import Mapping
from typing import Any

from gateway.errors import AuthenticationFailed, GatewayError, PermissionDenied
from gateway.http.asgi import send_error
from gateway.http.auth import Authenticator
from gateway.settings import AuditConfig

__all__ = ["DashboardMount"]

_CHALLENGE = [(b"www-authenticate", b'Basic realm="Verity audit", charset="UTF-8"')]


class DashboardMount:
    """ASGI: the dashboard under ``config.dashboard.path`` for the allowed keys."""

    def __init__(self, config: AuditConfig, auth: Authenticator) -> None:
        board = config.dashboard
        assert board.path is not None
        for module in ("duckdb", "starlette"):
            if importlib.util.find_spec(module) is None:
                raise RuntimeError(f"audit.dashboard needs {module}: pip install "
                                   f"'verity-gateway[audit]'")
        self.path = board.path
        self.keys = frozenset(board.keys)
        self.jaeger_url = board.jaeger_url
        self.spec = str(config.path or "")
        self.auth = auth
        self._app: Any = None

    def matches(self, path: str) -> bool:
        return path == self.path or path.startswith(self.path + "/")

    def _bearer(self, scope: Mapping[str, Any]) -> bytes | None:
        raw = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if raw is None or raw[:6].lower() != b"basic ":
            return raw
        try:  # Basic: the password is the gateway key
            decoded = base64.b64decode(raw[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            return b"Basic"
        _, _, secret = decoded.partition(b":")
        return b"Bearer " + secret if secret else b"Basic"

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        try:
            principal = self.auth.authenticate(self._bearer(scope))
            if principal is None or principal.key_name not in self.keys:
                raise PermissionDenied("This gateway key may not open the audit pages "
                                       "(audit.dashboard.keys).", code="audit_not_allowed")
        except AuthenticationFailed as err:
            return await send_error(send, err, _CHALLENGE)
        except GatewayError as err:
            return await send_error(send, err)
        if scope["path"] == self.path:  # /audit -> /audit/
            return await send_error(send, GatewayError(
                f"The audit pages are at {self.path}/.", status=308, code="moved",
                headers={"location": self.path + "/"}))
        if self._app is None:
            from gateway.dashboard.app import create_dashboard

            self._app = create_dashboard(self.spec, jaeger_url=self.jaeger_url)
        inner = dict(scope)
        inner["root_path"] = str(scope.get("root_path", "")) + self.path
        inner["path"] = inner["root_path"] + scope["path"][len(self.path):]
        await self._app(inner, receive, send)

    def close(self) -> None:
        if self._app is not None:
            self._app.state.store.close()
