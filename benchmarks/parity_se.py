"""Standard errors, information criteria and anova against mirt 1.45.1, as measured: LSAT7
(2PL, Rasch), mirt's Science data (graded, GPCM, PCM; GPCM and PCM at mirt's TOL = 1e-8).

References: tests/data/mirt_se/ (made once by make_reference.R there); the bounds are asserted
by tests/test_se.py. Run from the repository root, ../shared beside it:

    PYTHONPATH=src python benchmarks/parity_se.py
"""
import json
from pathlib import Path
import numpy as np, pandas as pd
from atlascat.irt.calibrate import calibrate
from atlascat.irt.compare import anova
from atlascat.responses import ResponseMatrix
REF = Path("tests/data/mirt_se")
df = pd.read_csv("../shared/data/classic/lsat7_patterns.csv")
lsat7 = ResponseMatrix(df.drop(columns="freq").to_numpy(float), item_ids=[f"Item.{i}" for i in range(1, 6)], weights=df["freq"].to_numpy(float))
def rel(got, ref):
    return np.max(np.abs(np.asarray(got, float) / np.asarray(ref, float) - 1))
def items(name):
    d = pd.read_csv(REF / f"{name}_items.csv"); return d[d.se.notna()]
r2 = calibrate(lsat7, model="2pl", prior_a=None, se=True); g = r2.standard_errors("mirt"); ref = items("lsat7_2pl")
print("lsat7 2pl SE max rel", max(rel(g[f"{p}_se"], ref[ref.parameter == p].se) for p in ("a1", "d")))
rr = calibrate(lsat7, model="rasch", se=True); g = rr.standard_errors("mirt"); ref = items("lsat7_rasch")
print("lsat7 rasch d SE max rel", rel(g["d_se"], ref[ref.parameter == "d"].se))
print("latent variance", rr.latent_variance, "(mirt", json.loads((REF / "lsat7_rasch_fit.json").read_text())["latent_variance"], "), its SE", rr.se.latent_variance_se,
      "(mirt", json.loads((REF / "lsat7_rasch_fit.json").read_text())["latent_variance_se"], ")")
for name, model in (("lsat7_2pl", "2pl"), ("lsat7_rasch", "rasch")):
    r = calibrate(lsat7, model=model, prior_a=None) if model != "rasch" else rr
    f = json.loads((REF / f"{name}_fit.json").read_text())
    ic = r.information_criteria()
    print(name, "criteria max abs diff", max(abs(ic[k] - f[k.upper()]) for k in ("aic", "bic", "sabic", "hq")))
print(anova(rr, r2).to_string())
sci = pd.read_csv(REF / "science.csv")
for name, model in (("science_graded", "graded"), ("science_gpcm", "gpcm"), ("science_gpcm_tight", "gpcm")):
    r = calibrate(sci, model=model, se=True, **({"tol": 1e-8} if "tight" in name else {}))
    g = r.standard_errors("mirt").set_index("item_id"); ref = items(name)
    got = [g.loc[i, f"{p}_se"] for i, p in zip(ref["item"], ref.parameter)]
    f = json.loads((REF / f"{name}_fit.json").read_text())
    ic = r.information_criteria()
    print(name, "SE max rel", rel(got, ref.se), "AIC diff", ic["aic"] - f["AIC"], "BIC diff", ic["bic"] - f["BIC"])
# the partial credit model (mirt's "Rasch" of ratings, at TOL 1e-8) and anova(pcm, gpcm)
rp = calibrate(sci, model="pcm", se=True, tol=1e-8); g = rp.standard_errors("mirt").set_index("item_id")
ref = items("science_pcm"); ref = ref[ref.parameter.str.match(r"^d[1-9]$")]
f = json.loads((REF / "science_pcm_fit.json").read_text()); ic = rp.information_criteria()
print("science_pcm SE max rel", rel([g.loc[i, f"{p}_se"] for i, p in zip(ref["item"], ref.parameter)], ref.se),
      "d max abs", np.max(np.abs([g.loc[i, p] - v for i, p, v in zip(ref["item"], ref.parameter, ref.value)])),
      "latent variance", rp.latent_variance, "(mirt", f["latent_variance"], "), its SE", rp.se.latent_variance_se,
      "(mirt", f["latent_variance_se"], "), criteria max abs diff", max(abs(ic[k] - f[k.upper()]) for k in ("aic", "bic", "sabic", "hq")))
print(anova(rp, calibrate(sci, model="gpcm", tol=1e-8)).to_string())
