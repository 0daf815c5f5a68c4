"""The policy file schema (strict: unknown keys are errors).

One policy per YAML file in the policies directory. Parsing is two steps, as
in tensorzero: the raw file is validated into :class:`PolicySpec` (this
module); the loader then *resolves* it — layer names against the registry,
each layer's ``config`` against that layer's own typed config — into a
ready-to-run policy. Every error carries the file, the dotted key and the line.

See ``docs/policies.md`` for the reference with examples.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gateway.policy.profiles import RISK_PROFILES
from gateway.sources.context import ContextSpec

__all__ = [
    "Action", "ActionSet", "BlockAction", "Budget", "Calibration", "DecisionSpec",
    "DecomposeAndRetryAction", "DisclaimerAction", "FlagAction", "LayerSpec", "MatchSpec",
    "PassAction", "PolicySpec", "RegenerateAction", "RequestSourcesAction", "RiskLevel",
    "RiskProfileSpec", "RiskSpec", "TEMPLATE_PLACEHOLDERS", "TelemetrySpec",
]

RiskLevel = Literal["low", "medium", "high", "critical"]
Band = Literal["pass", "marginal", "fail"]
Zone = Literal["GOOD", "MID", "BAD"]


def _default_zones() -> dict[Zone, Band]:
    return {"GOOD": "pass", "MID": "marginal", "BAD": "fail"}


TEMPLATE_PLACEHOLDERS: tuple[str, ...] = ("reasons", "score", "verdict", "policy", "failed_claims")
"""What action templates fill in (``gateway.verify.actions.fill_template``)."""

_HEADER_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Anything that reads as a placeholder: `{word}`, also with spaces or hyphens inside.
_PLACEHOLDER_LIKE = re.compile(r"\{\s*([A-Za-z_][\w-]*)\s*\}")


def _check_template(template: str) -> str:
    """Reject ``{word}`` placeholders the actions do not fill: they would reach the
    client literally. Other braces (``{}``, JSON, a lone ``{``) are left as written."""
    bad = [m for m in _PLACEHOLDER_LIKE.finditer(template)
           if m.group(0) != "{" + m.group(1) + "}" or m.group(1) not in TEMPLATE_PLACEHOLDERS]
    if not bad:
        return template
    known = ", ".join("{" + p + "}" for p in TEMPLATE_PLACEHOLDERS)
    guesses = []
    for m in bad:
        close = difflib.get_close_matches(m.group(1).lower().replace("-", "_"),
                                          TEMPLATE_PLACEHOLDERS, n=1)
        if close:
            guesses.append("{" + close[0] + "}")
    hint = f"; did you mean {', '.join(guesses)}?" if guesses else ""
    shown = ", ".join(m.group(0) for m in bad)
    raise ValueError(f"unknown placeholder{'s' if len(bad) > 1 else ''} {shown}{hint} "
                     f"(templates fill {known}; there is no escape for a literal {{word}})")


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
    return pattern


Template = Annotated[str, AfterValidator(_check_template)]
Regex = Annotated[str, AfterValidator(_check_regex)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatchSpec(_Strict):
    """Which requests a policy applies to. Every given criterion must match (AND);
    within a list any entry may match (OR). Empty = matches everything."""

    models: tuple[str, ...] = ()
    """Model name globs (``gpt-4o*``)."""
    routes: tuple[str, ...] = ()
    """Request path globs (``/v1/chat/completions``)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Header name (case-insensitive) -> value glob."""
    tenants: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    """Gateway key names."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Request ``metadata`` key -> value glob."""

    @property
    def client_selected(self) -> bool:
        """Whether the match names ``headers`` or ``metadata``: what the client sends,
        so the policy applies when the client asks for it (an opt-in). The other
        criteria — ``tenants``, ``keys`` (the authenticated caller), ``models``,
        ``routes`` — describe the request: a policy matched by them only is *assigned*."""
        return bool(self.headers or self.metadata)

    @property
    def targeted(self) -> bool:
        """Whether the match singles out callers or requests by what the client cannot
        choose: ``tenants``, ``keys``, ``models`` or ``routes``."""
        return bool(self.tenants or self.keys or self.models or self.routes)


class Calibration(_Strict):
    """Platt scaling: ``p = 1 / (1 + exp(a * score + b))`` (seed 000)."""

    a: float
    b: float


class LayerSpec(_Strict):
    name: str
    """Registry name, e.g. ``grounding``."""
    id: str | None = None
    """Distinct id when the same layer runs twice with different configs."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Validated by the layer's own typed config at load time."""
    weight: float = Field(1.0, ge=0)
    timeout_ms: int = Field(2000, gt=0)
    calibration: Calibration | None = None

    @field_validator("id")
    @classmethod
    def _header_safe_id(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER_SAFE.fullmatch(value):
            raise ValueError(f"invalid layer id {value!r}: use letters, digits, '.', '_' and "
                             f"'-' (it travels in the x-verity-layers header)")
        return value

    @property
    def key(self) -> str:
        return self.id or self.name


class RiskProfileSpec(_Strict):
    layers: tuple[str, ...]
    """Layer ids (``LayerSpec.key``) to run at this risk level."""
    min_confidence: float = Field(ge=0, le=1)
    """Optional in a policy file: :class:`RiskSpec` fills in seed 000's value for the
    level (low 0.70, medium 0.80, high 0.90, critical 0.95)."""
    max_latency_ms: int | None = Field(None, gt=0)
    max_cost: float | None = Field(None, ge=0)


class RiskSpec(_Strict):
    """``level: assess`` runs the seed 000 heuristic risk assessor on the answer;
    a fixed level skips it. ``profiles`` maps each level to the layers it runs (and
    the confidence a pass needs there, seed 000's for the level when left out);
    levels left out use every layer in ``layers``."""

    level: RiskLevel | Literal["assess"] = "medium"
    profiles: dict[RiskLevel, RiskProfileSpec] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _seed_min_confidence(cls, data: Any) -> Any:
        """A profile without ``min_confidence`` gets seed 000's value for its level."""
        if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
            return data
        profiles = {}
        for level, profile in data["profiles"].items():
            if (isinstance(profile, dict) and "min_confidence" not in profile
                    and level in RISK_PROFILES):
                profile = {**profile, "min_confidence": RISK_PROFILES[level].min_confidence}
            profiles[level] = profile
        return {**data, "profiles": profiles}


class DecisionSpec(_Strict):
    """How layer results become a verdict band (seed 000 by default).

    ``all_passed``: pass when every layer passed *and* the weighted mean of the
    calibrated scores is at least ``min_confidence`` (the risk profile's value
    when the policy gives none). Otherwise ``marginal`` when the mean is at least
    ``marginal_at``, else ``fail``. ``mean``: bands from the mean alone
    (``>= min_confidence`` pass). When a layer yields a seed 002 credit score
    (1–5), its zone maps to a band through ``zones`` and the worse band wins.
    """

    combine: Literal["all_passed", "mean"] = "all_passed"
    min_confidence: float | None = Field(None, ge=0, le=1)
    marginal_at: float = Field(0.5, ge=0, le=1)
    """When written, must not exceed ``min_confidence`` (checked at load; the default
    is not checked: a policy without a marginal band loads as it always did)."""
    zones: dict[Zone, Band] = Field(default_factory=_default_zones)

    @field_validator("marginal_at")
    @classmethod
    def _not_above_min_confidence(cls, value: float, info: ValidationInfo) -> float:
        floor = info.data.get("min_confidence")
        if floor is not None and value > floor:
            raise ValueError(_marginal_message(value, "decision.min_confidence", floor))
        return value


def _marginal_message(value: float, key: str, floor: float) -> str:
    return (f"{value:g} is above {key} {floor:g}: marginal is the band below "
            f"min_confidence and at or above marginal_at, so marginal_at must not exceed "
            f"it (set decision.marginal_at <= {floor:g})")


class PassAction(_Strict):
    type: Literal["pass"] = "pass"


class FlagAction(_Strict):
    """Deliver the answer unchanged; the verdict travels only in headers."""

    type: Literal["flag"] = "flag"


class DisclaimerAction(_Strict):
    type: Literal["disclaimer"] = "disclaimer"
    template: Template = ("\n\n---\n*Verity: parts of this answer could not be verified "
                          "against the provided sources ({reasons}).*")
    """Appended to the end of the answer; ``{reasons}``, ``{score}``, ``{verdict}``,
    ``{policy}`` and ``{failed_claims}`` are filled in."""


class BlockAction(_Strict):
    type: Literal["block"] = "block"
    style: Literal["completion", "error"] = "completion"
    """``completion``: an OpenAI-shaped completion carrying ``message`` with
    ``finish_reason: content_filter``. ``error``: an HTTP error with ``status``."""
    message: Template = "I can't provide that answer: it failed verification ({reasons})."
    status: int = Field(422, ge=400, le=599)


class RegenerateAction(_Strict):
    """Re-ask upstream with feedback naming the failed claims (seed 001's repair
    prompt), re-verify each attempt; after ``max_attempts`` apply ``fallback``
    (optionally first trying ``fallback_model``)."""

    type: Literal["regenerate"] = "regenerate"
    max_attempts: int = Field(1, ge=1, le=5)
    feedback_template: Template | None = None
    """Overrides the built-in repair prompt; ``{failed_claims}`` and ``{reasons}``."""
    fallback_model: str | None = None
    fallback: Annotated[PassAction | FlagAction | DisclaimerAction | BlockAction,
                        Field(discriminator="type")] = BlockAction()


class RequestSourcesAction(_Strict):
    """Seed 000 ``request-sources``: re-ask upstream to answer again citing, for each
    claim, the request's sources (their ids listed in the feedback); re-verify each
    attempt as ``regenerate`` does; after ``max_attempts`` apply ``fallback``. With no
    source to cite, ``fallback`` at once."""

    type: Literal["request-sources"] = "request-sources"
    max_attempts: int = Field(1, ge=1, le=5)
    feedback_template: Template | None = None
    """Overrides the built-in prompt (the source list is then not added)."""
    fallback: Annotated[PassAction | FlagAction | DisclaimerAction | BlockAction,
                        Field(discriminator="type")] = BlockAction()


class DecomposeAndRetryAction(_Strict):
    """Seed 000 ``decompose-and-retry``: re-ask upstream about each failed claim, one
    call per claim (``retry``; ``drop``: no call), keep the re-asked statements that
    verify, drop the rest with ``note``, and verify the assembled answer; its band's
    action applies, or ``fallback`` when that is an upstream action too."""

    type: Literal["decompose-and-retry"] = "decompose-and-retry"
    mode: Literal["retry", "drop"] = "retry"
    max_claims: int = Field(3, ge=1, le=10)
    """Failed claims re-asked (one upstream call and one verification each); failed
    claims past it are dropped."""
    note: Template = ("\n\n*Verity: statements that could not be verified were removed "
                      "from this answer.*")
    """Appended to the assembled answer when something was dropped ("" for none)."""
    fallback: Annotated[PassAction | FlagAction | DisclaimerAction | BlockAction,
                        Field(discriminator="type")] = BlockAction()


Action = Annotated[
    PassAction | FlagAction | DisclaimerAction | BlockAction | RegenerateAction
    | RequestSourcesAction | DecomposeAndRetryAction,
    Field(discriminator="type"),
]


class ActionSet(_Strict):
    """The action per verdict band."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    pass_: Action = Field(default_factory=PassAction, alias="pass")
    marginal: Action = Field(default_factory=DisclaimerAction)
    fail: Action = Field(default_factory=BlockAction)


class Budget(_Strict):
    total_ms: int = Field(5000, gt=0)
    """Whole verification time per request (all layers, all attempts)."""
    max_cost: float | None = Field(None, ge=0)
    """USD of judge calls per request; layers not yet started are skipped past it."""


class TelemetrySpec(_Strict):
    record_content: bool = False
    """Record prompt/answer text on spans (through the redaction hook)."""
    redact: tuple[Regex, ...] = ()
    """Regexes whose matches are replaced by ``[REDACTED]`` in recorded content
    (compiled at load: an invalid one is a load error)."""


class PolicySpec(_Strict):
    name: str | None = None
    """Defaults to the file name without extension."""
    description: str = ""
    default: bool = False
    """The policy used when no other matches (at most one)."""
    priority: int = 0
    """Higher wins among matching policies; ties break by name."""
    match: MatchSpec = MatchSpec()
    allow_header_selection: bool = False
    """Clients may pick this policy with ``x-verity-policy: <name>`` (where its
    ``match`` offers it: see :meth:`MatchSpec.client_selected` and the selection rules)."""
    enforce: bool | None = None
    """An assigned policy (matched without ``headers``/``metadata``) that is enforced
    cannot be replaced by a client's choice. Unset: enforced when the match targets
    ``tenants``, ``keys``, ``models`` or ``routes``; a catch-all (empty match, or
    ``default: true``) is not. Not allowed on a policy clients select."""
    allow_upgrade_to: tuple[str, ...] = ()
    """With ``enforce``: the policies a client may still switch to (ones the operator
    judged at least as strict as this one)."""
    mode: Literal["inline", "shadow"] = "shadow"
    sample_rate: float = Field(1.0, ge=0, le=1)
    """Share of matching requests verified (shadow and inline alike)."""
    candidates: tuple[str, ...] = ()
    """Other policies evaluated in shadow on the same response, for comparison."""
    context: ContextSpec = ContextSpec()
    risk: RiskSpec = RiskSpec()
    layers: tuple[LayerSpec, ...] = Field(min_length=1)
    decision: DecisionSpec = DecisionSpec()
    actions: ActionSet = ActionSet()
    on_error: Literal["fail_open", "fail_closed"] = "fail_open"
    budget: Budget = Budget()
    streaming: Literal["buffer", "passthrough"] = "buffer"
    expose_detail: bool = False
    """Add the per-layer detail body field ``verity`` when the client sends
    ``x-verity-detail: true`` (never otherwise: it is not in OpenAI's schema)."""
    telemetry: TelemetrySpec = TelemetrySpec()

    @property
    def enforced(self) -> bool:
        """Whether a client's choice is refused when this policy is assigned to a request."""
        if self.match.client_selected:
            return False
        return self.enforce if self.enforce is not None else self.match.targeted

    @field_validator("enforce")
    @classmethod
    def _enforce_only_when_assigned(cls, value: bool | None, info: ValidationInfo
                                    ) -> bool | None:
        match = info.data.get("match")
        if value is not None and isinstance(match, MatchSpec) and match.client_selected:
            raise ValueError("this policy's match names headers or metadata, so clients "
                             "select it; enforce applies to a policy assigned by tenants, "
                             "keys, models or routes, to a catch-all or to the default")
        return value

    @field_validator("allow_upgrade_to")
    @classmethod
    def _upgrades_need_enforce(cls, value: tuple[str, ...], info: ValidationInfo
                               ) -> tuple[str, ...]:
        match, enforce = info.data.get("match"), info.data.get("enforce")
        if not isinstance(match, MatchSpec):
            return value  # the match itself failed to validate: reported there
        if value and (match.client_selected
                      or not (enforce if enforce is not None else match.targeted)):
            raise ValueError("only an enforced policy limits what clients may switch to "
                             "(set enforce: true, or drop allow_upgrade_to)")
        if info.data.get("name") in value:
            raise ValueError("a policy cannot list itself")
        return value

    @model_validator(mode="after")
    def _unique_layer_keys(self) -> PolicySpec:
        keys = [layer.key for layer in self.layers]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"layer ids must be unique (give `id:`): {', '.join(dupes)}")
        known = set(keys)
        for level, profile in self.risk.profiles.items():
            missing = [k for k in profile.layers if k not in known]
            if missing:
                raise ValueError(f"risk.profiles.{level}.layers names layers not in `layers`: "
                                 f"{', '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _marginal_not_above_profiles(self) -> PolicySpec:
        """A written ``decision.marginal_at`` must not exceed the ``min_confidence`` of any
        risk profile the policy can use (when ``decision.min_confidence`` is not set)."""
        decision = self.decision
        if decision.min_confidence is not None or "marginal_at" not in decision.model_fields_set:
            return self
        for level, profile in self.risk.profiles.items():
            if self.risk.level not in ("assess", level):
                continue  # a fixed level never uses the other profiles
            if decision.marginal_at > profile.min_confidence:
                raise ValueError("decision.marginal_at: " + _marginal_message(
                    decision.marginal_at, f"risk.profiles.{level}.min_confidence",
                    profile.min_confidence))
        return self
