"""Graded (1-5 ratings) forms sharing 12 anchors, model populations N(0,1) and N(0.5, 1.2^2)
(true A = 1.2, B = 0.5); run from the repository root, then calibrate each with
`atlas calibrate graded_formK.csv --model graded -o bank_graded_formK.csv` (kept: the banks)."""
import numpy as np
import pandas as pd

rng = np.random.default_rng(17)
n_items = 36
a = rng.uniform(0.8, 2.2, n_items)
b = np.sort(rng.normal(0, 1.1, (n_items, 4)), axis=1)
ids = [f"g{j:02d}" for j in range(n_items)]


def draw(theta, cols):
    ps = 1 / (1 + np.exp(-a[cols, None, None] * (theta[None, :, None] - b[cols, None, :])))
    u = rng.random((len(cols), len(theta), 1))
    return 1 + (u < ps).sum(axis=2).T          # levels 1..5


n = 1500
for name, theta, cols in (("graded_form1", rng.normal(0, 1, n), np.arange(0, 24)),
                          ("graded_form2", rng.normal(0.5, 1.2, n), np.arange(12, 36))):
    df = pd.DataFrame(draw(theta, cols), columns=[ids[j] for j in cols])
    df.insert(0, "model", [f"{name}_m{i}" for i in range(n)])
    df.to_csv(f"/tmp/{name}.csv", index=False)
