# syntax=docker/dockerfile:1
#
# Verity Gateway image.
#
#   docker build -t verity-gateway .
#   docker run --rm -p 8080:8080 -e GATEWAY_UPSTREAM=https://api.openai.com/v1 verity-gateway
#
# Two stages: `build` turns the project and its dependencies into wheels; the runtime
# stage installs only those wheels (no compiler, no source tree, no pip cache) and runs
# as an unprivileged numeric user, so Kubernetes' runAsNonRoot can verify it.
# The static checks in tests/deploy/test_dockerfile.py guard the essentials.

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# .dockerignore lets in only what the wheel needs (pyproject, README, gateway/, policies/).
COPY . .
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --wheel-dir /wheels '.[redis,audit]'

# -------------------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="verity-gateway" \
      org.opencontainers.image.description="OpenAI-compatible gateway that verifies LLM answers with declarative policies" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    GATEWAY_POLICIES_DIR=/etc/verity/policies

# Fixed numeric ids: Kubernetes' runAsNonRoot can only verify a numeric USER.
RUN groupadd --system --gid 10001 verity \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/verity --shell /usr/sbin/nologin verity \
 && mkdir -p /var/lib/verity \
 && chown 10001:10001 /var/lib/verity

# The wheels are bind-mounted from the build stage, so they never become a layer here.
# [redis]: the image also runs `gateway worker` (fleet mode; pure-Python client).
# [audit]: DuckDB, for `gateway audit report|tail|show|replay|serve|compact` in the image.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels 'verity-gateway[redis,audit]'

# Shipped example policies; owned by root, read-only for the gateway. Mount your own
# directory over /etc/verity/policies (or point GATEWAY_POLICIES_DIR elsewhere).
COPY policies/ /etc/verity/policies/

# Writable working directory: the default audit file (verity-audit.jsonl) lands here.
WORKDIR /var/lib/verity
USER 10001:10001

EXPOSE 8080

# python:3.11-slim has no curl; urllib raises on a non-2xx answer, which exits non-zero.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]

ENTRYPOINT ["gateway"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
