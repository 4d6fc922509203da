"""CATConfig: defaults, validation, reference settings, serialization, its parts."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from atlascat.cat.config import CATConfig, Content, Estimation, Exposure, Selection, Stopping
from atlascat.errors import ConfigError


def test_paper_defaults():
    c = CATConfig()
    sel, stop, est = c.selection, c.stopping, c.estimation
    assert (sel.theta0, sel.first_item_window, sel.randomesque, stop.min_items,
            stop.max_items) == (0.0, 0.5, 5, 30, 500)
    assert (stop.se_stop, est.se_method, est.prior_mean, est.prior_sd) == \
        (0.1, "information", 0.0, 1.0)
    assert (est.quadpts, est.theta_range, sel.criterion) == (61, (-6.0, 6.0), "mfi")
    assert c.uniforms_per_step == 1


def test_reference_is_catr():
    r = CATConfig.reference().estimation
    assert (r.quadpts, r.theta_range, r.quadrature_rule) == (33, (-4.0, 4.0), "trapezoid")
    assert CATConfig.reference(se_stop=0.3).stopping.se_stop == 0.3


def test_fixed_length():
    c = CATConfig.fixed_length(40)
    s = c.stopping
    assert s.min_items == s.max_items == 40 and s.se_stop is None and c.is_fixed_length
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
    assert back.exposure.params == {"a": 0.5, "1": 1.0}
    assert c.uniforms_per_step == 2 * c.exposure.sh_max_trials
    assert c.replace(min_items=5).stopping.min_items == 5
    with pytest.raises(ConfigError, match="unknown"):
        CATConfig.from_dict({"bogus": 1})
    with pytest.raises(ConfigError):
        c.replace(max_items=1)


# ---------------------------------------------------------------------- parts
@pytest.mark.parametrize("build, match", [
    (lambda: Stopping(min_items=50, max_items=40), "min_items"),
    (lambda: Stopping(se_stop=-1), "se_stop"),
    (lambda: Stopping(budget=5.0), "cost"),
    (lambda: Selection(criterion="best"), "selection"),
    (lambda: Selection(randomesque=0), "randomesque"),
    (lambda: Estimation(theta_range=(1, -1)), "theta_range"),
    (lambda: Estimation(quadpts=2.5), "integer"),
    (lambda: Exposure(method="sympson_hetter"), "exposure_params"),
    (lambda: Exposure(r_max=2), "r_max"),
    (lambda: Content(column="area"), "both"),
])
def test_every_part_validates_itself(build, match):
    with pytest.raises(ConfigError, match=match):
        build()


def test_flat_keywords_and_parts_make_the_same_config():
    flat = CATConfig(max_items=50, se_stop=0.2, selection="kl", randomesque=3, quadpts=41,
                     exposure="eligibility", r_max=0.3, content_column="area",
                     content_targets={"a": 1.0})
    parts = CATConfig(stopping=Stopping(max_items=50, se_stop=0.2),
                      selection=Selection(criterion="kl", randomesque=3),
                      estimation=Estimation(quadpts=41),
                      exposure=Exposure(method="eligibility", r_max=0.3),
                      content=Content(column="area", targets={"a": 1.0}))
    assert flat == parts
    assert flat.stopping.max_items == 50 and flat.selection.criterion == "kl"
    assert flat.exposure.method == "eligibility" and flat.content.targets == {"a": 1.0}
    # a flat keyword given with its part changes that part's field
    assert CATConfig(stopping=Stopping(max_items=50), se_stop=0.3).stopping == \
        Stopping(max_items=50, se_stop=0.3)
    assert repr(flat) == ("CATConfig(quadpts=41, selection='kl', randomesque=3, max_items=50, "
                          "se_stop=0.2, exposure='eligibility', r_max=0.3, "
                          "content_column='area', content_targets={'a': 1.0})")
    with pytest.raises(ConfigError, match="unknown CATConfig setting"):
        CATConfig(max_item=50)
    with pytest.raises(ConfigError, match="Stopping"):
        CATConfig(stopping=50)


def test_replace_keeps_what_it_does_not_name():
    c = CATConfig(selection="astrat", randomesque=2, exposure="eligibility", r_max=0.4,
                  max_items=80)
    d = c.replace(selection="kl", exposure="none", se_stop=0.3)
    assert (d.selection.criterion, d.selection.randomesque) == ("kl", 2)
    assert (d.exposure.method, d.exposure.r_max) == ("none", 0.4)
    assert (d.stopping.se_stop, d.stopping.max_items) == (0.3, 80)
    assert c.replace(stopping=Stopping(max_items=40)).stopping.max_items == 40
    # dataclasses.replace: parts, and flat keywords other than selection / exposure
    assert dataclasses.replace(c, stopping=Stopping(max_items=40)).selection == c.selection
    assert dataclasses.replace(c, min_items=5).stopping.min_items == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.stopping.max_items = 3


# a CATConfig as the previous version stored it with a live run (flat, every field)
OLD_STORED = """{"theta0": 0.0, "first_item_window": 0.5, "randomesque": 3, "min_items": 10,
"max_items": 40, "se_stop": 0.2, "se_method": "posterior", "prior_mean": 0.0, "prior_sd": 1.0,
"quadpts": 33, "theta_range": [-4.0, 4.0], "quadrature_rule": "trapezoid", "selection": "mfi",
"kl_width": 3.0, "kl_points": 7, "astrat_strata": 4, "astrat_stage_items": null,
"reliability_stop": null, "min_info_stop": null, "exposure": "none", "r_max": 0.2,
"exposure_params": null, "sh_max_trials": 20, "content_column": null, "content_targets": null,
"content_length": null, "cost_per_item": null, "cost_column": null, "value_per_se": null,
"budget": null, "floor_theta": -2.0, "ceiling_theta": null, "bound_z": 1.96,
"score_curve": null, "score_sd_stop": null}"""


def test_configs_stored_flat_by_the_previous_version_load():
    old = json.loads(OLD_STORED)
    c = CATConfig.from_dict(old)
    assert c == CATConfig.reference(randomesque=3, min_items=10, max_items=40, se_stop=0.2,
                                    se_method="posterior", floor_theta=-2.0)
    assert c.to_dict() == old  # the stored format is unchanged
    nested = {"stopping": {"min_items": 10, "max_items": 40, "se_stop": 0.2, "floor_theta": -2.0},
              "estimation": {"quadpts": 33, "theta_range": [-4, 4], "quadrature_rule": "trapezoid",
                             "se_method": "posterior"},
              "selection": {"randomesque": 3}}
    assert CATConfig.from_dict(nested) == c
    with pytest.raises(ConfigError, match="unknown stopping setting"):
        CATConfig.from_dict({"stopping": {"max_item": 3}})


def test_a_session_stored_with_an_old_config_resumes(tmp_path):
    from atlascat.cat.session import CATSession
    from atlascat.catalogue import load_paper_bank

    bank = load_paper_bank("arc")
    config = CATConfig.from_dict(json.loads(OLD_STORED))
    rng = np.random.default_rng(4)
    answers = rng.random(200)
    s = CATSession(bank, config, rng=np.random.default_rng(9))
    for k in range(6):
        s.record(s.next_item(), float(answers[k] < 0.6))
    snap = json.loads(json.dumps(s.to_dict()))
    snap["config"] = json.loads(OLD_STORED)  # as the previous version wrote it
    resumed = CATSession.from_dict(snap, bank)
    for sess in (s, resumed):
        k = 6
        while (item := sess.next_item()) is not None:
            sess.record(item, float(answers[k] < 0.6))
            k += 1
    assert resumed.administered == s.administered and resumed.stop_reason == s.stop_reason
    assert resumed.theta == s.theta


def test_cli_errors_name_the_option_not_the_field():
    from atlascat.cli._options import cat_config

    with pytest.raises(ConfigError, match="--min-items .50. must be between 0 and --max-items"):
        cat_config(min_items=50, max_items=40)
    with pytest.raises(ConfigError, match="--selection must be one of"):
        cat_config(selection="best")


def test_comparing_a_part_with_a_name_raises_instead_of_being_false():
    c = CATConfig(selection="kl")
    assert c.selection.criterion == "kl" and c.exposure.method == "none"
    with pytest.raises(TypeError, match=r"config\.selection\.criterion"):
        c.selection == "kl"  # noqa: B015
    with pytest.raises(TypeError, match=r"config\.exposure\.method"):
        c.exposure != "none"  # noqa: B015
