"""GenAI events: span events and log records (private).

Owns what the OpenTelemetry implementation says as events, each both a span
event and (when a logger provider is configured) an OTLP log record in the span's
context: ``gen_ai.evaluation.result`` per verification layer, and
``gen_ai.client.inference.operation.details`` with message content, which is
recorded only when a policy opts in. Every free-text value here passes the
redaction hook first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.trace import Span, set_span_in_context

from gateway.redact import Redactor
from gateway.telemetry import semconv as sc
from gateway.telemetry._otel_attrs import clean_attrs

__all__ = ["EXPLANATION_LIMIT", "emit_evaluation", "evaluation_event", "inference_details",
           "message_parts"]

EXPLANATION_LIMIT = 1024


def evaluation_event(outcome: Mapping[str, Any], name: str, *, score: float | None,
                     error_type: str | None, response_id: str | None,
                     redact: Redactor) -> dict[str, Any]:
    """The ``gen_ai.evaluation.result`` attributes for one layer's outcome."""
    passed = outcome.get("passed")
    label = outcome.get("label") or ("pass" if passed is True
                                     else "fail" if passed is False else None)
    explanation = outcome.get("explanation")
    if explanation is not None:
        explanation = redact(str(explanation))[:EXPLANATION_LIMIT]
    return clean_attrs([
        # The layer's id: two layers of one type (``name``, in verity.layer.type) differ.
        (sc.GEN_AI_EVALUATION_NAME, name),
        (sc.VERITY_LAYER_TYPE, outcome.get("name")),
        (sc.GEN_AI_EVALUATION_SCORE_VALUE, score),
        (sc.GEN_AI_EVALUATION_SCORE_LABEL, label),
        (sc.GEN_AI_EVALUATION_EXPLANATION, explanation),
        (sc.GEN_AI_RESPONSE_ID, response_id),
        (sc.ERROR_TYPE, error_type),
    ])


def emit_evaluation(span: Span, logger: Logger | None, event: dict[str, Any]) -> None:
    """The evaluation event on the layer's span, and as a log record in its context."""
    span.add_event(sc.EVENT_GEN_AI_EVALUATION_RESULT, event)
    if logger is not None:
        logger.emit(event_name=sc.EVENT_GEN_AI_EVALUATION_RESULT, attributes=event,
                    context=set_span_in_context(span),
                    severity_number=SeverityNumber.INFO)


def message_parts(message: Mapping[str, Any], redact: Redactor) -> dict[str, Any]:
    """One chat message in the GenAI semconv shape: role and redacted text parts."""
    content = message.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"type": "text", "content": redact(content)})
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append({"type": "text", "content": redact(part["text"])})
            elif isinstance(part, Mapping):
                parts.append({"type": str(part.get("type", "unknown"))})
    return {"role": str(message.get("role", "user")), "parts": parts}


def inference_details(span: Span, logger: Logger | None,
                      messages: Sequence[Mapping[str, Any]], output: str | None,
                      redact: Redactor, *, response_id: str | None,
                      context: Context) -> None:
    """Input and output messages on the request span, and as a DEBUG log record in
    ``context`` (the upstream call's, when there was one)."""
    attrs: dict[str, Any] = {sc.GEN_AI_INPUT_MESSAGES: orjson.dumps(
        [message_parts(m, redact) for m in messages if isinstance(m, Mapping)]).decode()}
    if output is not None:
        attrs[sc.GEN_AI_OUTPUT_MESSAGES] = orjson.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": redact(output)}]}]
        ).decode()
    span.set_attributes(attrs)
    if logger is not None:
        logger.emit(
            event_name=sc.EVENT_GEN_AI_INFERENCE_DETAILS,
            attributes={**attrs, **clean_attrs([(sc.GEN_AI_RESPONSE_ID, response_id)])},
            context=context,
            severity_number=SeverityNumber.DEBUG)
