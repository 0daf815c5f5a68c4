"""``fact_options`` is built once per configuration object: what it returns must be
what the plain construction from that configuration gives, for each configuration."""

from __future__ import annotations

from gateway.layers import _grounding_sentence as S
from gateway.layers._grounding_facts import FactOptions
from gateway.layers.grounding import GroundingConfig


def _plain(cfg: GroundingConfig, binding: bool) -> FactOptions:
    return FactOptions(window=cfg.contradiction_window, bind_min=cfg.bind_min,
                       bind_ratio=cfg.bind_ratio, bind_margin=cfg.bind_margin,
                       substitute_min=cfg.substitute_min, binding=binding,
                       name_variants=cfg.name_variants)


def test_kept_options_are_the_plain_ones_of_each_configuration() -> None:
    configs = [GroundingConfig(),
               GroundingConfig(contradiction_window=5, bind_min=2.5, bind_ratio=1.1,
                               bind_margin=0.7, substitute_min=3.0),
               GroundingConfig(name_variants=not GroundingConfig().name_variants)]
    for _ in range(2):  # built, then found
        for cfg in configs:
            for binding in (True, False):
                assert S.fact_options(cfg, binding) == _plain(cfg, binding)
    assert S.fact_options(configs[1]) is S.fact_options(configs[1])
    assert S.fact_options(configs[0]) != S.fact_options(configs[1])


def test_an_equal_new_configuration_gets_its_own_entry() -> None:
    a = GroundingConfig(bind_min=2.0)
    b = a.model_copy(update={"bind_min": 3.0})  # another object, another value
    assert S.fact_options(a).bind_min == 2.0
    assert S.fact_options(b).bind_min == 3.0
    assert S.fact_options(a, binding=False).binding is False
