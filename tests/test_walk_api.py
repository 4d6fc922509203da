"""Walking the Python API as a notebook user: wrong input gives one readable atlascat error."""
import numpy as np
import pandas as pd
import pytest

import atlascat as ac


def _frame():
    rng = np.random.default_rng(0)
    x = (rng.random((30, 6)) < 0.6).astype(float)
    return pd.DataFrame(x, columns=[f"q{i}" for i in range(6)],
                        index=[f"m{i}" for i in range(30)])


def test_text_cell_in_first_item_column_is_named_not_taken_for_ids():
    df = _frame().reset_index(drop=True).astype(object)
    df.iloc[3, 0] = "yes"
    with pytest.raises(ac.ResponseDataError, match=r"text cell 'yes' at row 3.*column 'q0'"):
        ac.ResponseMatrix.from_frame(df)


def test_object_id_column_still_read_as_ids():
    df = _frame().reset_index().rename(columns={"index": "name"})
    rm = ac.ResponseMatrix.from_frame(df)
    assert list(rm.item_ids) == [f"q{i}" for i in range(6)]
    assert rm.subject_ids[0] == "m0"
