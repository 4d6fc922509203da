"""The multiple-group answer sets mirt's fixtures were written from (tests/data/mirt_groups:
make_reference.R, make_reference_graded.R); tests import it as a module."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

DATA = Path(__file__).parent / "data" / "mirt_groups"


def read_answers(prefix: str = ""):
    """(answers indexed by subject, each subject's group): ``prefix`` "" the binary set,
    "ordinal_" the graded / GPCM one."""
    x = pd.read_csv(DATA / f"{prefix}responses.csv", index_col=0)
    groups = pd.read_csv(DATA / f"{prefix}groups.csv", index_col=0)["group"]
    return x, groups
