"""Gateway configuration: the schema (:mod:`~gateway.settings.schema`) and how a file,
the ``GATEWAY_*`` environment and flags become one (:mod:`~gateway.settings.load`).

Precedence (later wins): built-in defaults < config file < environment <
command-line flags. Validation is strict: unknown keys are errors, and every error
names the dotted key and where it came from. ``docs/configuration.md`` lists the keys.
"""

from __future__ import annotations

from gateway.settings.jobs import PoolConfig, RedisConfig, ShadowConfig
from gateway.settings.load import load_settings
from gateway.settings.schema import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AuditConfig,
    AuditDashboardConfig,
    AuthConfig,
    ConfigError,
    GatewayKey,
    JudgeConfig,
    ServerConfig,
    Settings,
    TelemetryConfig,
    TenantConfig,
    Timeouts,
    UpstreamConfig,
    default_policies_dir,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES", "AuditConfig", "AuditDashboardConfig", "AuthConfig",
    "ConfigError", "GatewayKey", "JudgeConfig", "PoolConfig", "RedisConfig", "ServerConfig",
    "Settings", "ShadowConfig", "TelemetryConfig",
    "TenantConfig", "Timeouts", "UpstreamConfig", "default_policies_dir", "load_settings",
]
