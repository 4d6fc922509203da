"""Exposure control, content balancing and cost-aware stopping on the published banks.

    python benchmarks/bench_cat_exposure.py

A. Sympson-Hetter, HellaSwag bank (5600 items): K calibrated by iterative simulation on 3000
   thetas resampled from the paper's 386 test models (+ N(0, 0.1) jitter), then checked on a
   fresh resample of 5000 and on the 386 test thetas themselves. Settings: r_max = 0.2 with the
   paper's rule (tau = 0.2 or 0.1, at least 30 items) and with "items to reach SE <= 0.2"
   (min_items = 1); and r_max = 0.05 to show the price of a tight cap.
B. Restricted (eligibility) method, r_max = 0.2, same bank, the 386 test thetas as a cohort.
C. Maximum priority index on the HellaSwag bank with 5 content areas of unequal size (random
   assignment; targets 10/15/20/25/30 %), fixed length 50 and variable length (tau = 0.2).
D. Cost-aware stopping (cost 1 per item, value V per unit of SE) and a budget, ARC bank.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from atlascat.cat.config import CATConfig
from atlascat.cat.content import content_report
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.exposure_calibration import calibrate_sympson_hetter
from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas
from atlascat.irt.bank import ItemBank


def resample(thetas, n, seed):
    rng = np.random.default_rng(seed)
    return rng.choice(thetas, n) + rng.normal(0, 0.1, n)


def part_a(bank, test):
    print("A. Sympson-Hetter, HellaSwag")
    calib, fresh = resample(test, 3000, 0), resample(test, 5000, 1)
    for label, config, r_max in (
            ("r_max 0.2, tau 0.2, min 30 (paper)", CATConfig(se_stop=0.2), 0.2),
            ("r_max 0.2, tau 0.1, min 30", CATConfig(se_stop=0.1), 0.2),
            ("r_max 0.2, tau 0.2, min 1 (items to reach SE <= 0.2)",
             CATConfig(se_stop=0.2, min_items=1), 0.2),
            ("r_max 0.05, tau 0.2, min 1", CATConfig(se_stop=0.2, min_items=1), 0.05)):
        t0 = time.perf_counter()
        cal = calibrate_sympson_hetter(bank, config, calib, rng=2, r_max=r_max, n_iter=10)
        t_cal = time.perf_counter() - t0
        sh = config.replace(exposure="sympson_hetter", exposure_params=cal.params())
        rows = []
        for pop_name, pop in (("fresh 5000", fresh), ("386 test models", test)):
            for name, cfg in (("MFI", config), ("MFI + SH", sh)):
                r = simulate_cat(bank, cfg, thetas=pop, rng=3)
                rows.append({"population": pop_name, "selection": name,
                             "max_exposure": r.exposure.max(),
                             "items_over_1.1_rmax": int((r.exposure > 1.1 * r_max).sum()),
                             "mean_items": r.persons["n_items"].mean(),
                             "mae": r.persons["error"].abs().mean(),
                             "overlap": r.overlap()["pairwise"]})
        df = pd.DataFrame(rows)
        print(f"  {label}: calibration {t_cal:.1f} s, {int((cal.k < 1).sum())} items with K < 1, "
              f"max exposure per iteration {np.round(cal.history['max_exposure'].to_numpy(), 3)}")
        print(df.round(4).to_string(index=False))
        for pop_name in ("fresh 5000", "386 test models"):
            d = df[df["population"] == pop_name].set_index("selection")["mean_items"]
            print(f"  mean items rise ({pop_name}): {d['MFI']:.3f} -> {d['MFI + SH']:.3f} "
                  f"(+{d['MFI + SH'] - d['MFI']:.3f})")


def part_b(bank, test):
    print("\nB. Restricted / eligibility method, r_max = 0.2, HellaSwag, 386 test models")
    for tau in (0.1, 0.2):
        free = simulate_cat(bank, CATConfig(se_stop=tau), thetas=test, rng=3)
        ctrl = simulate_cat(bank, CATConfig(se_stop=tau, exposure="eligibility", r_max=0.2),
                            thetas=test, rng=3)
        print(f"  tau {tau}: max exposure {free.exposure.max():.3f} -> {ctrl.exposure.max():.3f}, "
              f"mean items {free.persons['n_items'].mean():.2f} -> "
              f"{ctrl.persons['n_items'].mean():.2f}, MAE {free.persons['error'].abs().mean():.4f}"
              f" -> {ctrl.persons['error'].abs().mean():.4f}, overlap "
              f"{free.overlap()['pairwise']:.3f} -> {ctrl.overlap()['pairwise']:.3f}")


def part_c(base, test):
    print("\nC. Maximum priority index, HellaSwag with 5 content areas")
    rng = np.random.default_rng(0)
    areas = rng.choice(list("ABCDE"), size=len(base), p=[0.35, 0.25, 0.2, 0.12, 0.08])
    bank = ItemBank(base.item_ids, *base.params, metadata=pd.DataFrame({"area": areas}))
    targets = {"A": 0.1, "B": 0.15, "C": 0.2, "D": 0.25, "E": 0.3}
    for label, cfg in (("fixed length 50", CATConfig.fixed_length(50)),
                       ("fixed length 47", CATConfig.fixed_length(47)),
                       ("tau 0.2", CATConfig(se_stop=0.2))):
        free = simulate_cat(bank, cfg, thetas=test, rng=4)
        mpi = simulate_cat(bank, cfg.replace(content_column="area", content_targets=targets),
                           thetas=test, rng=4)
        dev_free = content_report(free, bank, "area", targets)["deviation"].abs()
        dev = content_report(mpi, bank, "area", targets)["deviation"].abs()
        print(f"  {label}: max |items - target| per area {dev_free.max():.2f} -> {dev.max():.2f} "
              f"(share within 1 item: {np.mean(dev_free <= 1):.3f} -> {np.mean(dev <= 1):.3f}); "
              f"MAE {free.persons['error'].abs().mean():.4f} -> "
              f"{mpi.persons['error'].abs().mean():.4f}; mean items "
              f"{free.persons['n_items'].mean():.1f} -> {mpi.persons['n_items'].mean():.1f}")


def part_d():
    print("\nD. Cost-aware stopping (cost 1 per item), ARC, 417 test models")
    bank = load_bank("arc")
    test = load_test_thetas("arc")["theta"].to_numpy()
    for value in (5.0, 20.0, 80.0, 320.0):
        r = simulate_cat(bank, CATConfig(se_stop=None, min_items=5, cost_per_item=1.0,
                                         value_per_se=value), thetas=test, rng=5)
        p = r.persons
        print(f"  value {value:>5.0f}/SE: mean items {p['n_items'].mean():6.1f}, mean SE "
              f"{p['se'].mean():.4f}, MAE {p['error'].abs().mean():.4f}")
    r = simulate_cat(bank, CATConfig(se_stop=0.1, cost_per_item=1.0, budget=60.0), thetas=test,
                     rng=5)
    print(f"  budget 60 (tau 0.1): max items {r.persons['n_items'].max()}, stop reasons "
          f"{r.persons['stop_reason'].value_counts().to_dict()}")


def main():
    bank = load_bank("hellaswag")
    test = load_test_thetas("hellaswag")["theta"].to_numpy()
    part_a(bank, test)
    part_b(bank, test)
    part_c(bank, test)
    part_d()


if __name__ == "__main__":
    main()
