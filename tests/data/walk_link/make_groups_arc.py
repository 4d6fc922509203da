"""The anchors of two real ARC banks calibrated on non-equivalent groups: the weaker and the
stronger half of the dense_arc models (split at the median of a concurrent 3PL calibration's
EAP), 10 random anchors, the other items split between the halves, each half calibrated alone
(3PL, its automatic priors): benchmarks/study_linking_groups.py's "arc 3pl hard K=10" case
(seed 0). Stocking-Lord and Haebara disagree there (and both miss the concurrent reference,
A = 0.83, B = 2.75, by 2 or more). Run from the repository root with PYTHONPATH=src."""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, "benchmarks")
import study_linking_groups as st  # noqa: E402

df = pd.read_csv(st.DATA / "dense_arc.csv.gz", index_col=0)
df.columns = [str(c) for c in df.columns]
keep = {}
st.real_split(df, st._fit(df, "3pl"), "arc", "3pl", 10, "hard", np.random.default_rng([0, 10, True]),
              keep=keep)
out = Path(__file__).parent
for name in ("weak", "strong"):
    keep[name].subset(keep["anchors"]).write(out / f"bank_arc_{name}_anchors.csv")
