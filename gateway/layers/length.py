"""``length`` layer: the answer's length in characters must be within bounds.

Length is ``len(response_text.strip())``. Within ``[min_chars, max_chars]`` the
score is 1.0 and the layer passes. Outside, it fails with a graded score: the
fraction of the way to the bound (``n / min_chars`` when too short,
``max_chars / n`` when too long), so a 90-char answer against ``min_chars: 100``
scores 0.9, and an empty answer scores 0.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from gateway.layers.base import LayerConfig, LayerResources, LayerResult, VerifyInput

__all__ = ["LengthConfig", "LengthLayer"]


class LengthConfig(LayerConfig):
    min_chars: int = Field(default=0, ge=0)
    max_chars: int | None = Field(default=None, ge=0)
    """``None`` means no upper bound."""

    @model_validator(mode="after")
    def _ordered(self) -> LengthConfig:
        if self.max_chars is not None and self.max_chars < self.min_chars:
            raise ValueError(f"max_chars ({self.max_chars}) < min_chars ({self.min_chars})")
        return self


class LengthLayer:
    """Pass answers whose stripped length is within ``[min_chars, max_chars]``."""

    name: ClassVar[str] = "length"
    cpu_only: ClassVar[bool] = True
    Config: ClassVar[type[LayerConfig]] = LengthConfig

    def __init__(self, config: LengthConfig, resources: LayerResources | None = None) -> None:
        self.config = config

    async def verify(self, inp: VerifyInput) -> LayerResult:
        n = len(inp.response_text.strip())
        lo, hi = self.config.min_chars, self.config.max_chars
        details = {"chars": n, "min_chars": lo, "max_chars": hi}
        if n < lo:
            return LayerResult(score=n / lo, passed=False, label="too_short", details=details,
                               explanation=f"answer has {n} chars, fewer than min_chars={lo}")
        if hi is not None and n > hi:
            return LayerResult(score=hi / n, passed=False, label="too_long", details=details,
                               explanation=f"answer has {n} chars, more than max_chars={hi}")
        return LayerResult(score=1.0, passed=True, label="ok", details=details,
                           explanation=f"answer has {n} chars, within bounds")
