"""Two ARC banks on two random halves of the Open LLM Leaderboard models sharing 83 items
(../shared/data/openllm/dense_arc.csv.gz): form 1 = items 1-200 (column order) on 1100 models,
form 2 = items 118-317 on the other 1093. Run from the repository root; then
`atlas calibrate /tmp/arc{1,2}.csv --model 2pl -o tests/data/walk_link/bank_arc{1,2}.csv`."""
import numpy as np
import pandas as pd

m = pd.read_csv("../shared/data/openllm/dense_arc.csv.gz")
perm = np.random.default_rng(3).permutation(len(m))
items = list(m.columns[1:])
m.iloc[perm[:1100]][["model"] + items[:200]].to_csv("/tmp/arc1.csv", index=False)
m.iloc[perm[1100:]][["model"] + items[117:]].to_csv("/tmp/arc2.csv", index=False)
