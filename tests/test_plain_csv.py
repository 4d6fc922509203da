"""The pandas-free CSV path of ``atlas simulate`` (atlascat._table): files written as pandas
writes them, plain files read to what pandas reads, every other file left to pandas."""
from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from atlascat._table import is_decimal, plain_text, read_csv_header, read_plain_csv, write_csv
from atlascat.cli.cmd_simulate import frame_thetas, plain_thetas, read_thetas
from atlascat.errors import BankError, ResponseDataError
from atlascat.irt.bank import ItemBank, _read_plain_bank


def test_write_csv_writes_what_pandas_writes(tmp_path):
    rng = np.random.default_rng(0)
    floats = np.concatenate([[0.1, 1e-5, 1e16, -0.0, np.nan, np.inf, -np.inf, 1e-300, 5e-324,
                              1.2345678901234568e17, 1e22, 0.0001, 30.0],
                             rng.normal(size=7) * 10.0 ** rng.integers(-9, 9, 7)])
    n = floats.size
    text = np.array(["a", "b,c", 'd"e', "", "nan", "x y", " q", "line\nbreak", "1", "é",
                     "tab\there", "NA", "None", "z", "w", "v", "u", "t", "s", "r"], dtype=object)
    cols = {"x": floats, "s": text[:n], "i": np.arange(n), "u": np.array(["se"] * n),
            "b": np.arange(n) % 2 == 0, "o": np.array([1.5, None, "k", 2] * 5, dtype=object)[:n]}
    for name, table in {"all": cols, "one": {"s": text[:n]}, "none": {"x": floats[:0]},
                        "cr": {"a, b": np.array(["x\ry", "p"]), "n": np.array([1.0, np.nan])},
                        "floats": {"f": floats, "g": floats[::-1]},
                        "whole": {"w": np.array([0.0, 1.0, -3.0, np.nan, 9.5e15, 1e16, 30.0]),
                                  "z": np.array([0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
                                  "big": np.array([1e16, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])}}.items():
        write_csv(tmp_path / f"{name}_ours.csv", table)
        pd.DataFrame(table).to_csv(tmp_path / f"{name}_pandas.csv", index=False)
        assert ((tmp_path / f"{name}_ours.csv").read_bytes()
                == (tmp_path / f"{name}_pandas.csv").read_bytes()), name


def test_plain_text_lays_out_as_to_string():
    cols = {"figure": ["examinees", "items mean (sd)", "a much longer figure name", ""],
            "value": ["386", "41.34 (52.49)", "x", "0.0758"], "wide header": ["1", "", "22", "3"]}
    assert plain_text(cols) == pd.DataFrame(cols).to_string(index=False)


def test_is_decimal():
    assert all(map(is_decimal, ["1", "-1.5", "+.5", "1.", "1e-5", "2.5E+07", "0"]))
    assert not any(map(is_decimal, ["", " 1", "1 ", "nan", "inf", "1_000", "0x1", "1e", "--1",
                                    "NA", "1,5"]))


def test_read_plain_csv_refuses_what_is_not_plain(tmp_path):
    cases = {"dup.csv": "a,a\n1,2\n", "ragged.csv": "a,b\n1\n", "blank.csv": "a,b\n1,2\n\n3,4\n",
             "bom.csv": "\ufeffa,b\n1,2\n", "noname.csv": "a,\n1,2\n", "header_only.csv": "a,b\n",
             "data.parquet": "a,b\n1,2\n", "nosuffix": "a,b\n1,2\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert read_plain_csv(tmp_path / name) is None, name
    (tmp_path / "latin.csv").write_bytes(b"a,b\n\xe9,2\n")
    assert read_plain_csv(tmp_path / "latin.csv") is None
    assert read_plain_csv(tmp_path / "missing.csv") is None
    with gzip.open(tmp_path / "ok.csv.gz", "wt", encoding="utf-8") as fh:
        fh.write('"a","b"\n"x,1",2\n')
    assert read_plain_csv(tmp_path / "ok.csv.gz") == (["a", "b"], [["x,1", "2"]])
    assert read_csv_header(tmp_path / "ok.csv.gz") == ["a", "b"]
    (tmp_path / "t.tsv").write_text("a\tb\n1\t2\n")
    assert read_plain_csv(tmp_path / "t.tsv") == (["a", "b"], [["1", "2"]])


def _same_bank(x: ItemBank, y: ItemBank):
    assert list(x.item_ids) == list(y.item_ids) and x.model == y.model
    for p, q in zip(x.params, y.params):
        assert np.array_equal(p, q)
    assert x.metadata is None and y.metadata is None


@pytest.mark.parametrize("header, normalize", [("X,a1,d,g,u", True), ("X,a1,d", False),
                                               ("item_id,a,b,c", False), ("a,b,item_id,u", True)])
def test_plain_bank_is_the_bank_pandas_reads(tmp_path, header, normalize):
    rng = np.random.default_rng(1)
    cols = header.split(",")
    rows = []
    for j in range(40):
        vals = {"X": f"X{j}", "item_id": f"it{j}", "a1": repr(rng.lognormal()),
                "a": f"{rng.lognormal():.15g}", "d": repr(rng.normal()),
                "b": f"{rng.normal():.6e}", "g": repr(rng.uniform(0, .3)),
                "c": f"{rng.uniform(0, .3):.17g}", "u": "1"}
        rows.append(",".join(vals[c] for c in cols))
    path = tmp_path / "bank.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    plain = _read_plain_bank(path, normalize, None)
    assert plain is not None
    frame = ItemBank.from_frame(pd.read_csv(path, dtype={"item_id": str, "X": str}),
                                normalize_ids=normalize)
    _same_bank(plain, frame)
    _same_bank(ItemBank.read(path, normalize_ids=normalize), frame)


def test_other_banks_go_to_pandas(tmp_path):
    for name, text in {"meta.csv": "item_id,a,b,area\ni1,1,0,x\ni2,1,1,y\n",
                       "empty_cell.csv": "item_id,a,b,c\ni1,1,0,\ni2,1,1,0.1\n",
                       "na_cell.csv": "item_id,a,b\ni1,NA,0\n",
                       "zero_a.csv": "X,a1,d\nX1,0,1\nX2,1,1\n",
                       "no_id.csv": "a,b\n1,0\n"}.items():
        (tmp_path / name).write_text(text)
        assert _read_plain_bank(tmp_path / name, True, None) is None, name
    assert ItemBank.read(tmp_path / "meta.csv").metadata["area"].tolist() == ["x", "y"]
    with pytest.raises(BankError, match="a1 = 0"):
        ItemBank.read(tmp_path / "zero_a.csv")
    (tmp_path / "dup.csv").write_text("item_id,a,b\ni1,1,0\ni1,1,1\n")
    with pytest.raises(BankError, match="duplicate item id"):
        ItemBank.read(tmp_path / "dup.csv")


def testplain_thetas_are_what_pandas_reads(tmp_path):
    path = tmp_path / "th.csv"
    path.write_text('"Model_Name","Theta_WLE","SE"\n"org/m-1",1.41121292723045,0.03\n'
                    'm2,-0.5,0.1\n"a, b",2e-3,0.2\n')
    ids, values = plain_thetas(path)
    ids2, values2 = frame_thetas(path, "--thetas")
    assert ids == ids2 == ["org/m-1", "m2", "a, b"]
    assert np.array_equal(values, values2)
    # ids that pandas reads as numbers, booleans or missing: pandas' reading decides
    for body in ("1,0.5\n02,0.1\n", "true,0.5\nfalse,0.1\n", "NA,0.5\nm,0.1\n",
                 "m,nan\nn,0.1\n", "m, 0.5\nn,0.1\n"):
        path.write_text("subject_id,theta\n" + body)
        assert plain_thetas(path) is None, body
    path.write_text("subject_id,theta\n1,0.5\n02,0.1\n")
    assert read_thetas(path)[0] == ["1", "2"]
    path.write_text("theta\n0.5\n0.1\n")
    assert read_thetas(path)[0] == ["0", "1"]


@pytest.mark.parametrize("text, match", [
    ("subject_id,theta\nm1,0.5\nm1,0.1\n", "'m1' appears twice"),
    ("subject_id,theta\nm1,11\nm2,0.1\n", "outside"),
    ("subject_id,theta\nm1,abc\nm2,0.1\n", "row 2 .* not a number"),
    ("subject_id,value\nm1,1\n", "no theta column")])
def test_thetas_errors_on_both_paths(tmp_path, text, match):
    path = tmp_path / "th.csv"
    path.write_text(text)
    with pytest.raises(ResponseDataError, match=match):
        read_thetas(path)


def test_decimals_is_is_decimal_cell_by_cell():
    from atlascat._table import decimals

    for cells in (["1", "2.5", "-.5e3"], ["1", "2.5\x001"], ["1,2"], [""], ["1", " 2"], ["nan"],
                  ["1e5", "+3."], ["1", "inf"], ["0x1"]):
        want = [float(c) for c in cells] if all(map(is_decimal, cells)) else None
        assert decimals(cells) == want, cells
    assert decimals([]) is None
