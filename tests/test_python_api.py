"""The Python API as a user expects it (issue 19): calibrate-then-score works by default,
warnings point at the caller's line, the names public docstrings mention are exported, and the
main result objects have one-line reprs."""
from __future__ import annotations

import importlib
import inspect
import re
import warnings

import numpy as np
import pytest

import atlascat as at
from atlascat.errors import ResponseDataError


@pytest.fixture(scope="module")
def matrix_with_a_constant_item():
    rng = np.random.default_rng(19)
    n, m = 300, 12
    a = rng.uniform(0.8, 2.0, m)
    b = rng.normal(size=m)
    theta = rng.normal(size=n)
    y = (rng.random((n, m)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    y = np.c_[y, np.ones(n)]  # everyone got the last item right: calibrate leaves it out
    return at.ResponseMatrix(y, [f"m{k}" for k in range(n)],
                             [f"i{k}" for k in range(m)] + ["always"])


def test_calibrate_then_score_works_by_default(matrix_with_a_constant_item):
    rm = matrix_with_a_constant_item
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = at.calibrate(rm, model="2pl")
    assert "always" not in set(res.bank.item_ids)
    with pytest.warns(UserWarning, match=r"1 item\(s\) of the responses are not in the bank.*"
                                         r"'always'"):
        scores = at.estimate_ability(rm, res.bank)
    assert len(scores) == rm.n_subjects and np.isfinite(scores["theta"]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "ignore" is silent and gives the same scores
        quiet = at.estimate_ability(rm, res.bank, extra_items="ignore")
    np.testing.assert_allclose(quiet["theta"], scores["theta"])
    with pytest.raises(ResponseDataError, match="not in the bank"):  # the strict option
        at.estimate_ability(rm, res.bank, extra_items="error")


def test_warnings_point_at_the_callers_line(matrix_with_a_constant_item):
    rm = matrix_with_a_constant_item
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = at.calibrate(rm, model="2pl")
        at.estimate_ability(rm, res.bank)
        at.ResponseMatrix(np.array([[1.0, np.nan], [0.0, np.nan]]), ["a", "b"], ["x", "y"],
                          on_empty="drop")
    assert len(caught) >= 3
    assert {w.filename for w in caught} == {__file__}, [(w.filename, w.lineno) for w in caught]


def test_warnings_of_the_fit_indices_point_at_the_caller():
    from atlascat.irt import fit

    rng = np.random.default_rng(1)
    bank = at.ItemBank([f"i{k}" for k in range(5)], a=[1.0, 1.2, 0.8, 1.0, 1.0],
                       b=[0.0, 0.5, -0.5, 0.0, 1.0])
    y = (rng.random((40, 5)) < 0.5).astype(float)
    y[:, 0] = 1  # CFI/TLI are undefined: a warning from deep inside m2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit.m2(y, bank)
    assert [w.filename for w in caught] == [__file__], [(w.filename, w.lineno) for w in caught]


def _refs(doc: str):
    return re.findall(r":(?:class|func|meth|attr|exc):`~?([\w.]+)`", doc or "")


def _resolves(ref: str, obj) -> bool:
    head, *rest = ref.split(".")
    scopes = [at, inspect.getmodule(obj)]
    if inspect.isclass(obj):
        scopes.append(obj)
    for scope in scopes:
        target = getattr(scope, head, None)
        for part in rest:
            target = getattr(target, part, None)
        if target is not None:
            return True
    if head == "atlascat":
        try:
            importlib.import_module(ref)
            return True
        except ImportError:
            mod, _, name = ref.rpartition(".")
            try:
                return hasattr(importlib.import_module(mod), name)
            except ImportError:
                return False
    return False


def test_names_in_public_docstrings_are_exported():
    missing = []
    for name in at.__all__:
        obj = getattr(at, name)
        docs = [inspect.getdoc(obj) or ""]
        if inspect.isclass(obj):
            docs += [inspect.getdoc(v) or "" for k, v in vars(obj).items()
                     if not k.startswith("_") and callable(getattr(v, "__func__", v))]
        for doc in docs:
            missing += [(name, r) for r in _refs(doc) if r.startswith("_") or not _resolves(r, obj)]
            # a class named in prose (``Calibrator``) is a name the user can import
            for word in re.findall(r"\b([A-Z][a-z]+[A-Z][A-Za-z]*)\b", doc):
                if any(hasattr(importlib.import_module(m), word) for m in
                       ("atlascat.irt.calibrate", "atlascat.irt.ability", "atlascat.cat.simulate",
                        "atlascat.filtering", "atlascat.cat.exposure", "atlascat.cat.session")) \
                        and not hasattr(at, word):
                    missing.append((name, word))
    assert not missing, missing
    assert at.Calibrator is importlib.import_module("atlascat.irt.calibrate").Calibrator


def test_result_objects_have_short_one_line_reprs(matrix_with_a_constant_item):
    rm = matrix_with_a_constant_item
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = at.calibrate(rm, model="2pl")
    cat = at.simulate_cat(res.bank, thetas=np.array([-1.0, 0.0, 1.0]),
                          config=at.CATConfig(min_items=4, max_items=6),
                          rng=np.random.default_rng(0))
    ab = at.AbilityResult(np.zeros(5), np.ones(5), np.full(5, 3), np.array(["ok"] * 5), "eap")
    from atlascat.live.runner import RunResult

    run = RunResult("abc", "m", "done", 0.25, 0.1, 30, 12, 0.41, "se", items=["1"] * 30,
                    scores=[1] * 30)
    objects = {"CalibrationResult": res, "ItemBank": res.bank, "CATResult": cat,
               "ResponseMatrix": rm, "AbilityResult": ab, "RunResult": run}
    for cls, obj in objects.items():
        text = repr(obj)
        assert text.startswith(cls + "(") and "\n" not in text and len(text) < 200, text
        assert "array(" not in text and "[" not in text, text
    assert "n_items=12" in repr(res) and "model='2pl'" in repr(res)
    assert "n_examinees=3" in repr(cat)
    assert "theta=0.250 +- 0.100" in repr(run)
