"""Every telemetry name the gateway emits, in one place.

GenAI names follow the OpenTelemetry GenAI semantic conventions, latest
experimental ("development") version, which now live in the
``open-telemetry/semantic-conventions-genai`` repository (the constants in
``opentelemetry-semantic-conventions`` 0.66 are marked deprecated for that move,
so they are spelled out here rather than imported). A conventions change is an
edit to this file only.

Names under ``verity.*`` are the gateway's own (policy, verdict, action, layer
details): no convention covers them.
"""

from __future__ import annotations

from typing import Final

# --- GenAI attributes -------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"

# --- GenAI events (log records with an event name; also span events) -------
EVENT_GEN_AI_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
EVENT_GEN_AI_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"

# --- GenAI metrics ----------------------------------------------------------
METRIC_GEN_AI_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_GEN_AI_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_GEN_AI_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"

# Bucket boundaries the GenAI conventions recommend.
TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
                        4194304, 16777216, 67108864)
DURATION_BUCKETS: Final = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                           10.24, 20.48, 40.96, 81.92)
# Verification layers run from ~1 ms (in-process) to seconds (judge calls).
LAYER_DURATION_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# --- General (stable) attributes --------------------------------------------
ERROR_TYPE: Final = "error.type"
ERROR_TYPE_OTHER: Final = "_OTHER"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
CLIENT_ADDRESS: Final = "client.address"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
HTTP_ROUTE: Final = "http.route"
HTTP_REQUEST_RESEND_COUNT: Final = "http.request.resend_count"
"""On an upstream call's span from its second attempt on: the attempts before it."""
URL_PATH: Final = "url.path"
OTHER_METHOD: Final = "_OTHER"
"""``http.request.method`` for a method outside :data:`KNOWN_METHODS` (semconv)."""
KNOWN_METHODS: Final = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH",
                                  "POST", "PUT", "QUERY", "TRACE"})


def known_method(method: str) -> str:
    """``method`` if HTTP registers it, else :data:`OTHER_METHOD`: a client may send any
    token as a method, and span names and attributes must stay few."""
    return method if method in KNOWN_METHODS else OTHER_METHOD


URL_SCHEME: Final = "url.scheme"
URL_FULL: Final = "url.full"
NETWORK_PROTOCOL_VERSION: Final = "network.protocol.version"
USER_AGENT_ORIGINAL: Final = "user_agent.original"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"

# --- General events ---------------------------------------------------------
EVENT_EXCEPTION: Final = "exception"

# --- Gateway attributes -----------------------------------------------------
VERITY_LAYER_NAME: Final = "verity.layer.name"
"""The layer's id in its policy (its key, e.g. ``k1``); also ``gen_ai.evaluation.name``."""
VERITY_LAYER_TYPE: Final = "verity.layer.type"
"""The layer's registry name (e.g. ``keyword``): two layers of one type differ by id."""
VERITY_LAYER_SCORE: Final = "verity.layer.score"
VERITY_LAYER_PASSED: Final = "verity.layer.passed"
VERITY_LAYER_LATENCY_MS: Final = "verity.layer.latency_ms"
VERITY_LAYER_CACHE_HIT: Final = "verity.layer.cache_hit"
VERITY_LAYER_JUDGE_CALLS: Final = "verity.layer.judge_calls"
VERITY_LAYER_COST: Final = "verity.layer.cost"
VERITY_LAYER_ERROR: Final = "verity.layer.error"
VERITY_POLICY: Final = "verity.policy.name"
VERITY_POLICY_CANDIDATE: Final = "verity.policy.candidate"
"""True on a candidate policy's spans (evaluated in shadow, never applied)."""
VERITY_CANDIDATE_NAME: Final = "verity.candidate.name"
"""The candidate policy of a ``verity.candidate.decisions`` point (``verity.policy.name``
is the live policy it was evaluated beside)."""
VERITY_MODE: Final = "verity.mode"
VERITY_VERDICT: Final = "verity.verdict"
VERITY_SCORE: Final = "verity.score"
VERITY_ACTION: Final = "verity.action"
VERITY_ATTEMPTS: Final = "verity.attempts"
VERITY_ATTEMPT_NUMBER: Final = "verity.attempt.number"
VERITY_SHADOW_TRACE_ID: Final = "verity.shadow.trace_id"
VERITY_SHADOW_KIND: Final = "verity.shadow.kind"
"""What a shadow-queue job is: ``shadow`` (a shadow policy's audit) or ``candidates``."""
VERITY_SHADOW_REASON: Final = "verity.shadow.reason"
"""Why a shadow job was dropped: ``full`` (the queue), ``closed`` (shutting down) or
``relay_busy`` (the relay's own loop saturated: ``gateway.pool.relay_load``)."""
VERITY_SHADOW_RESULT: Final = "verity.shadow.result"
"""How a background job ended: ``verified``, ``abandoned`` (over budget), ``failed``
(an error, or its worker process died), ``dropped``, ``cancelled``."""
VERITY_WORKER_EXIT: Final = "verity.worker.exit"
"""Why a verification worker process was replaced: ``died`` or ``killed`` (stuck)."""
# The inline prepare step (span ``prepare context``).
VERITY_PREPARE_LAYERS: Final = "verity.prepare.layers"
VERITY_PREPARE_FAILED_LAYER: Final = "verity.prepare.failed_layer"
VERITY_PREPARE_CONTEXT_CHARS: Final = "verity.prepare.context_chars"
VERITY_PREPARE_USED: Final = "verity.prepare.used"

# Upstream attempts (retries, fallbacks, load balancing; span ``chat``, and
# the request's SERVER span for the one that served it).
VERITY_UPSTREAM_NAME: Final = "verity.upstream.name"
"""The configured upstream name (``upstreams[].name``)."""
VERITY_UPSTREAM_ATTEMPT: Final = "verity.upstream.attempt"
"""The attempt's number within the request's upstream exchange, from 1."""
VERITY_UPSTREAM_ATTEMPTS: Final = "verity.upstream.attempts"
"""On the SERVER span: upstream calls it took (retries and fallbacks included)."""
VERITY_UPSTREAM_OUTCOME: Final = "verity.upstream.outcome"
"""How one attempt ended: ``ok``, or the retry decision (``retry``, ``retry_elsewhere``,
``attempts_exhausted``, ``status_400``, ``not_idempotent`` …)."""
VERITY_UPSTREAM_STATE: Final = "verity.upstream.state"

# --- Gateway events ---------------------------------------------------------
EVENT_VERITY_DECISION: Final = "verity.decision"

# Metric attribute values for a record without a verdict or action (not verified:
# shadow queue full or shut down, upstream error, a body that is not a completion).
NO_VERDICT: Final = "none"
NO_ACTION: Final = "none"

# --- HTTP metrics (stable HTTP semantic conventions) ------------------------
METRIC_HTTP_SERVER_DURATION: Final = "http.server.request.duration"
# The conventions' advice for http.server.request.duration, widened for LLM calls
# (a chat completion takes seconds to minutes).
HTTP_DURATION_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0,
                                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)

# --- Gateway metrics --------------------------------------------------------
METRIC_CANDIDATE_DECISIONS: Final = "verity.candidate.decisions"
METRIC_LAYER_DURATION: Final = "verity.layer.duration"
METRIC_LAYER_VERDICTS: Final = "verity.layer.verdicts"
METRIC_DECISIONS: Final = "verity.decisions"
METRIC_JUDGE_COST: Final = "verity.judge.cost"
METRIC_SHADOW_QUEUE_DEPTH: Final = "verity.shadow.queue.depth"
METRIC_SHADOW_QUEUE_WAIT: Final = "verity.shadow.queue.wait"
METRIC_SHADOW_VERIFIED_RATIO: Final = "verity.shadow.verified_ratio"
METRIC_WORKERS: Final = "verity.workers"
QUEUE_WAIT_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                             2.5, 5.0, 10.0, 30.0)
METRIC_UPSTREAM_ATTEMPTS: Final = "verity.upstream.attempts"
METRIC_UPSTREAM_SERVED: Final = "verity.upstream.served"
METRIC_UPSTREAM_STATE: Final = "verity.upstream.state"
"""Gauge per upstream: 0 closed (healthy), 1 half-open (probing), 2 open (skipped)."""
METRIC_UPSTREAM_IN_FLIGHT: Final = "verity.upstream.in_flight"

# Counters callers bump through ``Telemetry.count(short_name, …)``:
# short name -> (metric name, unit, description). Unknown short names become
# ``verity.<short_name>`` counters with unit ``1``.
COUNTERS: Final[dict[str, tuple[str, str, str]]] = {
    "shadow.dropped": ("verity.shadow.dropped", "{request}",
                       "Shadow audits dropped because the queue was full."),
    "shadow.enqueued": ("verity.shadow.enqueued", "{request}",
                        "Shadow audits accepted into the queue."),
    "shadow.cancelled": ("verity.shadow.cancelled", "{request}",
                         "Shadow audits cancelled (shutdown drain deadline)."),
    "shadow.failed": ("verity.shadow.failed", "{request}",
                      "Shadow audits that raised."),
    "fail_open": ("verity.fail_open", "{request}",
                  "Requests passed because verification failed and the policy fails open."),
    "fail_closed": ("verity.fail_closed", "{request}",
                    "Requests blocked because verification failed and the policy fails closed."),
    "verifications": ("verity.verifications", "1",
                      "Verification records finished, by policy, mode, verdict and action."),
    "shadow.settled": ("verity.shadow.settled", "{request}",
                       "Background jobs ended, by kind and result (verified, abandoned, "
                       "failed, dropped, cancelled): the verified share of the sample."),
    "shadow.abandoned": ("verity.shadow.abandoned", "{request}",
                         "Background jobs abandoned at their budget.total_ms."),
    "workers.replaced": ("verity.workers.replaced", "{process}",
                         "Verification worker processes replaced (died, or killed stuck)."),
    # Fleet mode (gateway.fleet): relays publish jobs, gateway workers verify them.
    "fleet.published": ("verity.fleet.published", "{request}",
                        "Verification jobs a relay published to the Redis stream."),
    "fleet.verified": ("verity.fleet.verified", "{request}",
                       "Jobs a gateway worker verified and recorded."),
    "fleet.failed": ("verity.fleet.failed", "{request}",
                     "Jobs a gateway worker recorded as failed (timeout, poison)."),
    "fleet.duplicates": ("verity.fleet.duplicates", "{request}",
                         "Redeliveries of a job already recorded (no second record)."),
    "fleet.claimed": ("verity.fleet.claimed", "{request}",
                      "Jobs claimed from a consumer idle past redis.claim_idle_seconds."),
    "fleet.rejected": ("verity.fleet.rejected", "{request}",
                       "Stream entries that are not a job a worker reads."),
    "fleet.lost": ("verity.fleet.lost", "{request}",
                   "Jobs trimmed from the stream before any worker verified them."),
}

# Histograms callers record through ``Telemetry.observe(short_name, value, …)``:
# short name -> (metric name, unit, description, bucket boundaries).
HISTOGRAMS: Final[dict[str, tuple[str, str, str, tuple[float, ...]]]] = {
    "shadow.queue.wait": (METRIC_SHADOW_QUEUE_WAIT, "s",
                          "Time a background job waited in the queue before it started.",
                          QUEUE_WAIT_BUCKETS),
}

# Gauges callers register through ``Telemetry.gauge(short_name, fn)``.
GAUGES: Final[dict[str, tuple[str, str, str]]] = {
    "shadow.verified_ratio": (METRIC_SHADOW_VERIFIED_RATIO, "1",
                              "Share of the background jobs settled in the last minute that "
                              "were verified (the effective shadow sample, relative to the "
                              "policies' sample_rate)."),
    "workers": (METRIC_WORKERS, "{process}", "Verification worker processes alive."),
}

# Attribute keys callers pass to ``Telemetry.count`` -> the exported attribute name.
# Keys not listed here are exported as given.
COUNTER_ATTRIBUTES: Final[dict[str, str]] = {
    "policy": VERITY_POLICY,
    "mode": VERITY_MODE,
    "verdict": VERITY_VERDICT,
    "action": VERITY_ACTION,
    "layer": VERITY_LAYER_NAME,
    "kind": VERITY_SHADOW_KIND,
    "reason": VERITY_SHADOW_REASON,
    "result": VERITY_SHADOW_RESULT,
    "exit": VERITY_WORKER_EXIT,
}

# Resource defaults.
DEFAULT_SERVICE_NAME: Final = "verity-gateway"
SERVICE_INSTANCE_ID: Final = "service.instance.id"
"""Default: ``HOSTNAME-PID`` (one per process)."""
INSTRUMENTATION_SCOPE: Final = "verity_gateway"
