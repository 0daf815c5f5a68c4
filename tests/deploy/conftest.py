"""Deployment artefact tests: Dockerfile, .dockerignore, Helm chart."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "helm: renders or lints the Helm chart; skipped without the helm binary or "
        "helm-python-sdk")
