"""CATConfig: defaults, validation, reference settings, serialization."""
from __future__ import annotations

import json

import pytest

from atlascat.cat.config import CATConfig
from atlascat.errors import ConfigError


def test_paper_defaults():
    c = CATConfig()
    assert (c.theta0, c.first_item_window, c.randomesque, c.min_items, c.max_items) == \
        (0.0, 0.5, 5, 30, 500)
    assert (c.se_stop, c.se_method, c.prior_mean, c.prior_sd) == (0.1, "information", 0.0, 1.0)
    assert (c.quadpts, c.theta_range, c.selection) == (61, (-6.0, 6.0), "mfi")
    assert c.uniforms_per_step == 1


def test_reference_is_catr():
    r = CATConfig.reference()
    assert (r.quadpts, r.theta_range, r.quadrature_rule) == (33, (-4.0, 4.0), "trapezoid")
    assert CATConfig.reference(se_stop=0.3).se_stop == 0.3


def test_fixed_length():
    c = CATConfig.fixed_length(40)
    assert c.min_items == c.max_items == 40 and c.se_stop is None and c.is_fixed_length
    assert not CATConfig().is_fixed_length


@pytest.mark.parametrize("kw, match", [
    (dict(min_items=50, max_items=40), "min_items"),
    (dict(max_items=0), "max_items"),
    (dict(randomesque=0), "randomesque"),
    (dict(se_method="bootstrap"), "se_method"),
    (dict(selection="best"), "selection"),
    (dict(prior_sd=0), "prior_sd"),
    (dict(theta_range=(2, -2)), "theta_range"),
    (dict(se_stop=-0.1), "se_stop"),
    (dict(reliability_stop=1.5), "reliability_stop"),
    (dict(quadrature_rule="simpson"), "quadrature_rule"),
    (dict(randomesque=2.5), "integer"),
    (dict(exposure="sympson_hetter"), "exposure_params"),
    (dict(exposure="other"), "exposure"),
    (dict(r_max=0), "r_max"),
    (dict(content_column="area"), "both"),
    (dict(content_column="area", content_targets={"x": 0.5, "y": 0.4}), "sum to 1"),
    (dict(content_column="area", content_targets={"x": 1.0}, selection="astrat"), "criterion"),
    (dict(value_per_se=10.0), "cost_per_item"),
    (dict(budget=10.0), "cost"),
    (dict(theta0=float("nan")), "finite"),
])
def test_validation(kw, match):
    with pytest.raises(ConfigError, match=match):
        CATConfig(**kw)


def test_json_round_trip_and_replace():
    c = CATConfig(se_stop=None, min_items=10, max_items=20, exposure="sympson_hetter",
                  exposure_params={"a": 0.5, 1: 1.0}, content_column="area",
                  content_targets={"x": 0.25, "y": 0.75})
    d = json.loads(json.dumps(c.to_dict()))
    back = CATConfig.from_dict(d)
    assert back == c
    assert back.exposure_params == {"a": 0.5, "1": 1.0}
    assert c.uniforms_per_step == 2 * c.sh_max_trials
    assert c.replace(min_items=5).min_items == 5
    with pytest.raises(ConfigError, match="unknown"):
        CATConfig.from_dict({"bogus": 1})
    with pytest.raises(ConfigError):
        c.replace(max_items=1)
