"""Batched adaptive rounds (next_items / record_many / simulate_cat(batch_size=k)) and the
import structure of atlascat.cat."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import json

import numpy as np
import pandas as pd
import pytest

from conftest import HANG_S

from atlascat.cat.answers import model_probability
from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas
from atlascat.errors import AtlasError, ConfigError, LiveRunError, ResponseDataError
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix
from test_layering import find_cycle

CAT_DIR = Path(__file__).resolve().parents[1] / "src" / "atlascat" / "cat"


def _cat_imports(cat_dir: Path = CAT_DIR) -> dict[str, set[str]]:
    """Module -> the atlascat.cat modules it imports (module level or inside functions)."""
    graph = {}
    for path in sorted(cat_dir.glob("*.py")):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level == 1:          # from .x import ..., from . import x
                    targets = [mod] if mod else [a.name for a in node.names]
                elif node.level == 0 and mod.startswith("atlascat.cat."):
                    targets = [mod.split(".")[2]]
                elif node.level == 0 and mod == "atlascat.cat":
                    targets = [a.name for a in node.names]
                else:
                    targets = []
                deps.update(t.split(".")[0] for t in targets)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("atlascat.cat."):
                        deps.add(a.name.split(".")[2])
        graph[name] = {d for d in deps if (cat_dir / f"{d}.py").exists() and d != name}
    return graph


_find_cycle = find_cycle  # the package-wide checker's (tests/test_layering.py)


class TestImportStructure:
    def test_no_cycle_among_cat_modules(self):
        graph = _cat_imports()
        assert {"simulate", "exposure", "exposure_calibration"} <= set(graph)
        assert "simulate" in graph["exposure_calibration"] and "exposure" in graph["simulate"]
        cycle = _find_cycle(graph)
        assert cycle is None, "import cycle: " + " -> ".join(cycle)

    def test_cycle_detector_sees_a_lazy_cycle(self, tmp_path):
        # the old engine <-> exposure cycle went through imports inside functions
        (tmp_path / "engine.py").write_text("def f():\n    from .exposure import g\n")
        (tmp_path / "exposure.py").write_text("def g():\n    from .engine import f\n")
        (tmp_path / "other.py").write_text("from . import engine\n")
        graph = _cat_imports(tmp_path)
        assert graph == {"engine": {"exposure"}, "exposure": {"engine"}, "other": {"engine"}}
        assert _find_cycle(graph) in (["engine", "exposure", "engine"],
                                      ["exposure", "engine", "exposure"])

    @pytest.mark.parametrize("first", ["atlascat.cat.exposure_calibration", "atlascat.cat.exposure"])
    def test_import_any_module_first(self, first):
        code = (f"import {first}\n"
                "from atlascat.cat.exposure_calibration import calibrate_sympson_hetter\n"
                "from atlascat.cat.exposure import ExposureTracker\n"
                "from atlascat.cat.session import CATSession\n"
                "from atlascat.cat.simulate import simulate_cat\n"
                "print('ok')")
        env_path = str(CAT_DIR.parents[1])
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"PYTHONPATH": env_path, "OPENBLAS_NUM_THREADS": "1",
                                  "PATH": "/usr/bin:/bin"}, timeout=HANG_S)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ok"


# ---------------------------------------------------------------------------- batched rounds
@pytest.fixture(scope="module")
def arc_bank():
    return load_bank("arc")


@pytest.fixture(scope="module")
def small_bank():
    rng = np.random.default_rng(7)
    n = 120
    areas = np.array(["x", "y", "z"])[rng.integers(0, 3, n)]
    cost = rng.choice([1.0, 2.0, 3.0], n)
    return ItemBank([f"i{j}" for j in range(n)], rng.lognormal(0.2, 0.3, n),
                    rng.normal(0, 1.2, n), rng.uniform(0, 0.25, n),
                    metadata=pd.DataFrame({"area": areas, "cost": cost}))


def run_sessions(bank, config, thetas, seed, k, cut="predicted", use_record=False,
                 method="mepv"):
    """Examinee i as a CATSession driven by next_items(k) / record_many; answers from its own
    stream in pick order (what simulate_cat(thetas=...) does). Returns sessions, rounds."""
    rng = np.random.default_rng(seed)
    n = len(thetas)
    sel, ans = rng.spawn(n), rng.spawn(n)
    a, b, c, u = bank.params
    sessions, rounds = [], []
    for i in range(n):
        s = CATSession(bank, config, rng=sel[i])
        r = 0
        while items := s.next_items(k, cut=cut, method=method):
            assert 1 <= len(items) <= k and len(set(items)) == len(items)
            j = bank.index_of(items)
            y = (ans[i].random(len(items)) < model_probability(thetas[i], a[j], b[j], c[j],
                                                               u[j])).astype(float)
            if use_record:  # one by one, in pick order: the same as record_many
                for item, v in zip(items, y):
                    s.record(item, v)
            else:
                s.record_many(items, y)
            r += 1
        sessions.append(s)
        rounds.append(r)
    return sessions, rounds


def assert_same(res, sessions, rounds=None):
    for i, s in enumerate(sessions):
        batch = res.selected_items(str(i))
        seq = s.history
        assert list(seq["item_id"]) == list(batch["item_id"]), i
        np.testing.assert_array_equal(seq["score"].to_numpy(), batch["score"].to_numpy())
        np.testing.assert_array_equal(seq["theta"].to_numpy(), batch["theta"].to_numpy())
        np.testing.assert_array_equal(seq["se"].to_numpy(), batch["se"].to_numpy())
        assert res.persons["stop_reason"][i] == s.stop_reason
        assert res.persons["theta"][i] == s.theta and res.persons["se"][i] == s.se
        if rounds is not None:
            assert res.persons["rounds"][i] == rounds[i]


def sh_params(bank, rng):
    return dict(zip(map(str, bank.item_ids), rng.uniform(0.2, 1.0, len(bank)).tolist()))


class TestBatchedEqualsSessions:
    def test_k1_is_the_classic_cat(self, arc_bank):
        """next_items(1) / record_many reproduce the classic simulate_cat bit for bit."""
        thetas = load_test_thetas("arc")["theta"].to_numpy()[:25]
        config = CATConfig(se_stop=0.2, max_items=80)
        res = simulate_cat(arc_bank, config, thetas=thetas, rng=np.random.default_rng(11))
        assert "rounds" not in res.persons.columns
        sessions, rounds = run_sessions(arc_bank, config, thetas, 11, 1)
        assert_same(res, sessions)
        assert rounds == list(res.persons["n_items"])

    @pytest.mark.parametrize("k, method", [(2, "expected"), (8, "expected"),
                                           (5, "preposterior"), (6, "mepv")])
    def test_arc_bank(self, arc_bank, k, method):
        thetas = load_test_thetas("arc")["theta"].to_numpy()[:30]
        config = CATConfig(se_stop=0.2, max_items=80)
        res = simulate_cat(arc_bank, config, thetas=thetas, rng=np.random.default_rng(11),
                           batch_size=k, batch_method=method)
        sessions, rounds = run_sessions(arc_bank, config, thetas, 11, k, method=method)
        assert_same(res, sessions, rounds)
        assert res.persons["n_items"].nunique() > 1
        # rounds of k: the items need about n / k rounds
        p = res.persons
        assert (p["rounds"] >= np.ceil(p["n_items"] / k)).all()
        assert (p["rounds"] <= np.ceil(p["n_items"] / k) + 3).all()

    @pytest.mark.parametrize("kw", [
        dict(selection="kl", max_items=20, se_stop=None, min_items=20),
        dict(selection="astrat", max_items=24, se_stop=None, min_items=24),
        dict(selection="random", max_items=15, se_stop=None, min_items=15),
        dict(se_method="posterior", se_stop=0.3, randomesque=1),
        dict(se_stop=0.25, min_items=5, content_column="area",
             content_targets={"x": 0.5, "y": 0.3, "z": 0.2}),
        dict(se_stop=None, min_items=5, cost_column="cost", budget=40.0),
        dict(se_stop=0.3, min_items=5, cost_per_item=0.01, value_per_se=1.0),
        dict(se_stop=None, min_items=8, min_info_stop=0.3, max_items=60),
        dict(se_stop=0.3, min_items=4, reliability_stop=0.9),
        "sympson_hetter",
    ])
    @pytest.mark.parametrize("k, cut, method", [(3, "predicted", "expected"),
                                                (4, "none", "expected"),
                                                (5, "predicted", "mepv")])
    def test_rules(self, small_bank, kw, k, cut, method):
        thetas = np.random.default_rng(3).normal(size=12)
        if kw == "sympson_hetter":
            kw = dict(se_stop=0.3, min_items=6, exposure="sympson_hetter",
                      exposure_params=sh_params(small_bank, np.random.default_rng(1)))
        config = CATConfig(**kw)
        res = simulate_cat(small_bank, config, thetas=thetas, rng=5, batch_size=k,
                           batch_cut=cut, batch_method=method)
        sessions, rounds = run_sessions(small_bank, config, thetas, 5, k, cut,
                                        use_record=kw.get("selection") == "kl", method=method)
        assert_same(res, sessions, rounds)
        if config.stopping.budget is not None:
            spent = [small_bank.metadata["cost"].reindex(s.administered).sum() for s in sessions]
            assert max(spent) <= config.stopping.budget
        assert (res.persons["n_items"] <= config.stopping.max_items).all()

    def test_replay_with_missing_cells(self, small_bank, rng):
        n, k = 30, 4
        thetas = rng.normal(size=n)
        p = small_bank.probability(thetas)
        y = (rng.random(p.shape) < p).astype(float)
        y[rng.random(y.shape) < 0.5] = np.nan
        y[0, 10:] = np.nan  # few answered items: the examinee runs out
        rm = ResponseMatrix(y, [f"s{i}" for i in range(n)], small_bank.item_ids,
                            on_empty="keep")
        config = CATConfig(se_stop=0.3, max_items=30, min_items=5)
        res = simulate_cat(small_bank, config, responses=rm, rng=np.random.default_rng(2),
                           batch_size=k)
        assert res.n_skipped == res.persons["n_skipped"].sum() > 0
        sel = np.random.default_rng(2).spawn(n)
        for i in range(n):
            s = CATSession(small_bank, config, rng=sel[i])
            left = int((~np.isnan(y[i])).sum())
            while left and (items := s.next_items(k)):
                scores = y[i, small_bank.index_of(items)]
                s.record_many(items, [None if np.isnan(v) else v for v in scores])
                left -= int((~np.isnan(scores)).sum())
            batch = res.selected_items(f"s{i}")
            assert list(s.history["item_id"]) == list(batch["item_id"])
            np.testing.assert_array_equal(s.history["theta"].to_numpy(),
                                          batch["theta"].to_numpy())
            assert s.n_skipped == res.persons["n_skipped"][i]
            assert s.stop_reason == res.persons["stop_reason"][i] or (
                left == 0 and res.persons["stop_reason"][i] == "bank_exhausted")
            scored = small_bank.index_of(batch["item_id"])
            assert not np.isnan(y[i, scored]).any()

    def test_cohort_eligibility_caps_hold(self, arc_bank):
        thetas = load_test_thetas("arc")["theta"].to_numpy()[:60]
        config = CATConfig(se_stop=0.3, max_items=40, exposure="eligibility", r_max=0.3)
        res = simulate_cat(arc_bank, config, thetas=thetas, rng=1, batch_size=6)
        assert res.exposure.max() <= 0.3 + 1e-12
        assert (res.persons["n_items"] >= 30).all()


class TestRounds:
    def test_round_respects_max_items_and_stop(self, arc_bank):
        config = CATConfig(se_stop=None, min_items=10, max_items=10)
        s = CATSession(arc_bank, config, rng=1)
        sizes = []
        while items := s.next_items(4):
            sizes.append(len(items))
            s.record_many(items, [1, 0, 1, 0][:len(items)])
        assert sizes == [4, 4, 2] and s.n_items == 10 and s.stop_reason == "max_items"
        assert s.next_items(4) == [] and s.next_item() is None

    def test_predicted_cut_ends_the_round_where_the_test_would_stop(self, arc_bank):
        thetas = load_test_thetas("arc")["theta"].to_numpy()[:60]
        config = CATConfig(se_stop=0.3)
        items = {}
        for k, cut in [(1, "predicted"), (8, "predicted"), (8, "none")]:
            res = simulate_cat(arc_bank, config, thetas=thetas, rng=4, batch_size=k,
                               batch_cut=cut)
            items[k, cut] = res.persons["n_items"].mean()
        # without the cut a round of 8 runs past min_items = 30 (to 32) and past the SE stop
        assert items[8, "none"] > items[8, "predicted"]
        assert items[8, "predicted"] <= 1.15 * items[1, "predicted"]

    def test_pending_round_is_stable_and_draws_nothing(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(), rng=2)
        first = s.next_items(5)
        state = s.rng.bit_generator.state
        assert s.next_items(5) == first and s.next_items(2) == first
        assert s.next_item() == first[0] and s.pending == first
        assert s.rng.bit_generator.state == state
        s.record(first[1], 1)
        assert s.next_items(5) == [first[0]] + first[2:]
        s.record_many(list(reversed(first[2:])), [0, 1, 1])
        assert s.next_items(5) == [first[0]]
        s.skip(first[0])
        nxt = s.next_items(5)
        assert len(nxt) == 5 and not set(nxt) & set(first)
        assert s.administered == [first[1]] + list(reversed(first[2:]))

    def test_items_within_a_round_differ_and_are_informative(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(randomesque=1), rng=0)
        s.record_many(s.next_items(10), [1, 0] * 5)
        items = s.next_items(16, method="expected")
        assert len(set(items)) == 16
        # randomesque 1 at a theta that barely moves within the round: the 16 most informative
        info = arc_bank.information(s.theta)
        free = np.ones(len(arc_bank), bool)
        free[arc_bank.index_of(s.administered)] = False
        best = set(np.asarray(arc_bank.item_ids)[free][np.argsort(-info[free])[:24]].astype(str))
        assert len(set(items) & best) >= 14

    def test_mepv_covers_a_wide_posterior(self, arc_bank):
        """First round (prior N(0, 1)): expected-answer picks cluster where the information
        peaks at theta0; minimum expected posterior variance spreads them over the prior."""
        spread = {}
        for method in ("expected", "mepv"):
            s = CATSession(arc_bank, CATConfig(randomesque=1), rng=0)
            b = arc_bank.b[arc_bank.index_of(s.next_items(12, method=method))]
            spread[method] = b.std()
        assert spread["mepv"] > 2 * spread["expected"]
        # later rounds (narrow posterior): both pick among the most informative items at theta
        s = CATSession(arc_bank, CATConfig(randomesque=1, se_stop=None, max_items=100), rng=0)
        while s.n_items < 40:
            items = s.next_items(8, method="mepv")
            s.record_many(items, (arc_bank.probability(0.5)[arc_bank.index_of(items)] > 0.5)
                          .astype(float))
        items = s.next_items(8, method="mepv")
        info = arc_bank.information(s.theta)
        free = np.ones(len(arc_bank), bool)
        free[arc_bank.index_of(s.administered)] = False
        top = np.asarray(arc_bank.item_ids)[free][np.argsort(-info[free])[:30]].astype(str)
        assert len(set(items) & set(top)) >= 6

    def test_record_many_validates_before_recording(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(), rng=0)
        items = s.next_items(3)
        with pytest.raises(ResponseDataError, match="2 scores"):
            s.record_many(items, [1, 0])
        with pytest.raises(ResponseDataError, match="in \\[0, 1\\]"):
            s.record_many(items, [1, 0, 2])
        with pytest.raises(LiveRunError, match="twice"):
            s.record_many([items[0], items[0]], [1, 1])
        with pytest.raises(LiveRunError, match="not in the bank"):
            s.record_many([items[0], "nope"], [1, 1])
        assert s.n_items == 0 and s.pending == items
        s.record_many(items, [1, None, float("nan")])
        assert s.n_items == 1 and s.n_skipped == 2
        with pytest.raises(LiveRunError, match="already"):
            s.record_many(items[:1], [1])
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(ConfigError, match="batch size"):
                s.next_items(bad)
        with pytest.raises(ConfigError, match="cut"):
            s.next_items(2, cut="sometimes")
        with pytest.raises(ConfigError, match="method"):
            s.next_items(2, method="oracle")
        with pytest.raises(ConfigError, match="batch_size"):
            simulate_cat(arc_bank, CATConfig(), thetas=[0.0], batch_size=0)
        assert issubclass(ConfigError, AtlasError)

    def test_caller_chosen_item_drops_the_round(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(), rng=0)
        items = s.next_items(3)
        other = next(str(i) for i in arc_bank.item_ids if str(i) not in items)
        s.record(other, 1)
        assert s.pending == [] and s.n_items == 1
        assert s.next_items(3) != items


class TestResumeBatch:
    @pytest.mark.parametrize("answered", [0, 1, 3])
    def test_resume_with_an_outstanding_round(self, arc_bank, answered):
        config = CATConfig(se_stop=0.12, min_items=20, max_items=60)
        truth = 0.4
        p_all = arc_bank.probability(truth)

        def run(stop_at=None):
            ans = np.random.default_rng(9)
            s = CATSession(arc_bank, config, rng=np.random.default_rng(8))
            n_round = 0
            while items := s.next_items(5):
                y = (ans.random(len(items)) < p_all[arc_bank.index_of(items)]).astype(float)
                if n_round == stop_at:
                    s.record_many(items[:answered], y[:answered])
                    snap = json.loads(json.dumps(s.to_dict()))
                    assert snap["pending_batch"] == items[answered:]
                    s = CATSession.from_dict(snap, arc_bank)
                    assert s.next_items(5) == items[answered:]
                    s.record_many(items[answered:], y[answered:])
                else:
                    s.record_many(items, y)
                n_round += 1
            return s

        full, resumed = run(), run(stop_at=2)
        pd.testing.assert_frame_equal(resumed.history.drop(columns="seconds"),
                                      full.history.drop(columns="seconds"))
        assert resumed.stop_reason == full.stop_reason
        assert resumed.theta == full.theta and resumed.se == full.se

    def test_old_snapshot_with_single_pending_item(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(), rng=3)
        item = s.next_item()
        d = s.to_dict()
        del d["pending_batch"], d["unchecked"]
        r = CATSession.from_dict(d, arc_bank)
        assert r.next_item() == item and r.pending == [item]

    def test_truncated_snapshot_is_a_clear_error(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(), rng=3)
        s.record_many(s.next_items(3), [1, 0, 1])
        d = s.to_dict()
        d["scores"] = d["scores"][:1]
        with pytest.raises(ConfigError, match="truncated"):
            CATSession.from_dict(d, arc_bank)


@pytest.mark.parametrize("method", ["expected", "preposterior", "mepv"])
def test_large_bank_with_pruner(method):
    """The 5600-item HellaSwag bank uses the exact MFI shortcut; batched rounds agree with
    sessions there too (the preposterior scores bypass it)."""
    bank = load_bank("hellaswag")
    thetas = load_test_thetas("hellaswag")["theta"].to_numpy()[:8]
    config = CATConfig(se_stop=0.25, max_items=40)
    res = simulate_cat(bank, config, thetas=thetas, rng=2, batch_size=6, batch_method=method)
    sessions, rounds = run_sessions(bank, config, thetas, 2, 6, method=method)
    assert_same(res, sessions, rounds)


def test_mepv_pruning_is_exact(monkeypatch):
    """The bound-pruned mepv ranking equals the full scan (same items, thetas, SEs)."""
    from atlascat.cat import state

    bank = load_bank("hellaswag")
    thetas = load_test_thetas("hellaswag")["theta"].to_numpy()[:12]
    config = CATConfig(se_stop=0.2, max_items=40)
    calls = {"n": 0, "exact": 0, "first": 0, "first_exact": 0}
    orig = state._Engine._mepv_pruned

    def counting(self, rows, blocked, n_cand, m_min=64):
        out = orig(self, rows, blocked, n_cand, m_min)
        calls["n"] += rows.size
        calls["exact"] += int(out[0].sum())
        if m_min == 64:
            calls["first"] += rows.size
            calls["first_exact"] += int(out[0].sum())
        return out

    monkeypatch.setattr(state._Engine, "_mepv_pruned", counting)
    pruned = simulate_cat(bank, config, thetas=thetas, rng=1, batch_size=8)
    # the shortcut settles most picks (the second, wider try the rest but a few)
    assert calls["first_exact"] > 0.5 * calls["first"] > 0
    assert calls["first"] - calls["exact"] < 0.1 * calls["first"]

    def never(self, rows, blocked, n_cand, m_min=64):
        return (np.zeros(rows.size, bool), np.full((rows.size, n_cand), -1),
                np.zeros(rows.size, np.intp))

    monkeypatch.setattr(state._Engine, "_mepv_pruned", never)
    full = simulate_cat(bank, config, thetas=thetas, rng=1, batch_size=8)
    pd.testing.assert_frame_equal(pruned.administered, full.administered)
    pd.testing.assert_frame_equal(pruned.persons.drop(columns="seconds"),
                                  full.persons.drop(columns="seconds"))
