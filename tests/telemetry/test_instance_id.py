"""``service.instance.id``: one per process (``serve --workers``, ``gateway worker``), so
their metrics never merge into one series."""

from __future__ import annotations

import os
import socket

from gateway.commands.supervise import instance_attributes
from gateway.telemetry._otel_setup import _resource


def test_default_instance_id_names_the_host_and_process() -> None:
    attrs = _resource({}).attributes
    assert attrs["service.instance.id"] == f"{socket.gethostname()}-{os.getpid()}"


def test_a_configured_instance_id_is_kept_and_numbered_per_worker() -> None:
    raw = "deployment.environment=prod,service.instance.id=pod-a"
    assert _resource({"OTEL_RESOURCE_ATTRIBUTES": raw}).attributes[
        "service.instance.id"] == "pod-a"
    assert instance_attributes(raw, 1) == "deployment.environment=prod,service.instance.id=pod-a-1"
    assert instance_attributes("deployment.environment=prod", 1) == "deployment.environment=prod"
