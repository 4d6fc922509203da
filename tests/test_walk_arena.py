"""A user walk of ``atlas arena`` and ``atlascat.design.bradley_terry``: defects found and fixed."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.design.bradley_terry import BradleyTerry, comparisons_from_battles
from atlascat.errors import ResponseDataError


def frame(rows):
    return pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])


def test_a_name_with_stray_spaces_is_the_same_player(tmp_path, capsys):
    """'Llama-3 ü' and ' Llama-3 ü' (a hand-edited CSV) used to be two players, and the fit was
    refused because one of them 'never beat or tied' the other."""
    df = frame([("GPT 4o", "Llama-3 ü", "a"), ("Llama-3 ü", "GPT 4o", "a"),
                ("GPT 4o", "Llama-3 ü", "tie"), (" Llama-3 ü", "GPT 4o ", "b")])
    comp = comparisons_from_battles(df)
    assert sorted(comp.players) == ["GPT 4o", "Llama-3 ü"]
    fit = BradleyTerry().fit(df)
    # two players, w=2, l=1, t=1 of n=4: theta = sqrt((n-w)(n-l)/(wl)), gap 0.5 log(w(n-l)/(l(n-w)))
    assert fit.tie_param_ == pytest.approx(np.sqrt(3), abs=1e-7)
    gap = fit.ratings_[list(fit.players_).index("GPT 4o")] * 2
    assert gap == pytest.approx(0.5 * np.log(3), abs=1e-7)
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    assert main(["arena", "fit", str(path)]) == 0
    with pytest.raises(ResponseDataError, match="row 0: model_b is blank"):
        comparisons_from_battles(frame([("A", "  ", "a")]))


def test_a_winner_that_is_both_a_code_and_a_name_is_refused(tmp_path, capsys):
    """Players named 1 and 2 with the winner written as the winning model: '1' when model_b is
    1 used to count as a win of model_a (the code '1'), silently turning the result around."""
    df = frame([("1", "2", "2"), ("2", "1", "1"), ("1", "2", "1")])
    with pytest.raises(ResponseDataError, match="row 1: winner '1' is both an outcome code and "
                                                "the name of model_b"):
        comparisons_from_battles(df)
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    assert main(["arena", "fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "write the winner as a, b or tie" in err
    # names that agree with the code, or are not codes at all, still read as names
    comp = comparisons_from_battles(frame([("7", "5", "7"), ("5", "7", "7"), ("1", "5", "1")]))
    k = {p: i for i, p in enumerate(comp.players)}
    assert comp.wins[k["7"], k["5"]] == 2 and comp.wins[k["1"], k["5"]] == 1
    with pytest.raises(ResponseDataError, match=r"winner 'x' at row 0 is not one of"):
        comparisons_from_battles(frame([("A", "B", "x")]))
