"""Graded and GPCM fits against mirt 1.45.1, as measured: log-likelihood, AIC/BIC, the largest
parameter difference from mirt's TOL = 1e-8 fit (the maximum), the largest EAP difference.

References: tests/data/mirt_poly/ (made once by make_reference.R there); the bounds are asserted
by tests/test_polytomous_parity.py. Run from the repository root, ../shared beside it:

    PYTHONPATH=src python benchmarks/parity_polytomous.py
"""
import json
from pathlib import Path
import numpy as np, pandas as pd
from atlascat.irt.ability import estimate_ability
from atlascat.irt.calibrate import calibrate
REF = Path("tests/data/mirt_poly")
for data, model, ref in [("science", "graded", "science_graded"), ("science", "gpcm", "science_gpcm"), ("sim_graded", "graded", "sim_graded")]:
    y = pd.read_csv(REF / f"{data}.csv").set_index("subject_id")
    res = calibrate(y, model=model)
    s = json.loads((REF / f"{ref}_summary.json").read_text())
    t = json.loads((REF / f"{ref}_tight_summary.json").read_text())
    it = pd.read_csv(REF / f"{ref}_tight_items.csv")
    ours = res.bank.to_frame("mirt").set_index("item_id").loc[it.item_id.astype(str)]
    cols = [c for c in it.columns[1:]]
    diff = np.nanmax(np.abs(ours[cols].to_numpy(float) - it[cols].to_numpy(float)))
    eap = estimate_ability(y, res.bank, "eap")
    m = pd.read_csv(REF / f"{ref}_eap.csv")
    e = np.max(np.abs(eap["theta"].to_numpy() - m.iloc[:, 1].to_numpy()))
    print(f"{ref}: n={len(y)} loglik {res.loglik:.4f} mirt {s['loglik']:.4f} (TOL 1e-8 {t['loglik']:.4f}); AIC {res.aic:.4f} vs {s['aic']:.4f}; BIC {res.bic:.4f} vs {s['bic']:.4f}; params max|diff| {diff:.2e}; EAP max|diff| {e:.4f}; iters {res.n_iter} vs {s['n_iter']}")
