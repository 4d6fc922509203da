"""ResponseMatrix: readers, writers, validation with clear messages, binarization."""
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from atlascat import ResponseDataError, ResponseMatrix
from atlascat.responses import tinybenchmarks_threshold


def write(tmp_path, text, name="r.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


class TestReaders:
    def test_wide_csv_gz_with_unnamed_first_column(self, shared_data):
        rm = ResponseMatrix.read(shared_data / "openllm" / "tiny_arc.csv.gz")
        assert rm.shape == (3747, 99)
        assert rm.subject_ids[0] == "0-hero/Matter-0.1-7B"
        assert rm.item_ids[:3].tolist() == ["1", "6", "24"]
        assert rm.values.dtype == np.float64 and rm.missing_fraction == 0.0

    def test_union_gsm8k_counts(self, shared_data):
        rm = ResponseMatrix.read(shared_data / "openllm" / "union_gsm8k.csv.gz", on_empty="keep")
        assert rm.shape == (4783, 1189)
        assert 0.6 < rm.missing_fraction < 0.65
        with pytest.raises(ResponseDataError, match=r"item\(s\) with no response: \['480'"):
            ResponseMatrix.read(shared_data / "openllm" / "union_gsm8k.csv.gz")

    def test_drop_empty_warns_and_lists(self, tmp_path):
        path = write(tmp_path, "model,i1,i2,i3\nm1,1,,0\nm2,0,,1\nm3,,,\n")
        with pytest.warns(UserWarning, match=r"\['m3'\].*\['i2'\]"):
            rm = ResponseMatrix.read(path, on_empty="drop")
        assert rm.shape == (2, 2) and rm.item_ids.tolist() == ["i1", "i3"]

    def test_missing_cells_are_nan(self, tmp_path):
        rm = ResponseMatrix.read(write(tmp_path, "model,a,b\nm1,1,\nm2,NA,0\n"))
        assert np.isnan(rm.values[0, 1]) and np.isnan(rm.values[1, 0])
        assert_allclose(rm.accuracy, [1.0, 0.0])

    def test_parquet_and_csv_round_trip(self, tmp_path, rng):
        values = rng.integers(0, 2, (5, 4)).astype(float)
        values[1, 2] = np.nan
        values[0, 0] = 0.25
        rm = ResponseMatrix(values, [f"s{i}" for i in range(5)], ["q1", "q2", "q3", "q4"])
        for name in ("x.parquet", "x.csv", "x.csv.gz"):
            back = ResponseMatrix.read(rm.write(tmp_path / name))
            assert_array_equal(back.values, rm.values)
            assert back.subject_ids.tolist() == rm.subject_ids.tolist()
            assert back.item_ids.tolist() == rm.item_ids.tolist()

    def test_parquet_with_index(self, tmp_path):
        df = pd.DataFrame({"1": [1.0, 0.0], "2": [0.0, 1.0]}, index=pd.Index(["m1", "m2"], name="model"))
        df.to_parquet(tmp_path / "p.parquet")
        rm = ResponseMatrix.read(tmp_path / "p.parquet")
        assert rm.subject_ids.tolist() == ["m1", "m2"] and rm.item_ids.tolist() == ["1", "2"]

    def test_long_format_file_and_frame(self, tmp_path):
        path = write(tmp_path, "subject,item,score\nm1,q1,1\nm1,q2,0\nm2,q2,1\n")
        rm = ResponseMatrix.read(path)
        assert rm.shape == (2, 2)
        assert np.isnan(rm.values[1, 0]) and rm.values[1, 1] == 1.0
        long = rm.to_long()
        again = ResponseMatrix.from_long(long)
        assert_array_equal(again.values, rm.values)

    def test_long_duplicates_rejected(self):
        df = pd.DataFrame({"subject": ["m", "m"], "item": ["q", "q"], "score": [1, 0]})
        with pytest.raises(ResponseDataError, match="repeat a \\(subject, item\\) pair.*'m'.*'q'"):
            ResponseMatrix.from_long(df)

    def test_dataframe_index_as_subjects(self):
        df = pd.DataFrame({"X514": [1, 0], "X2": [0, 1]}, index=["m1", "m2"])
        rm = ResponseMatrix.from_frame(df, normalize_ids=True)
        assert rm.item_ids.tolist() == ["514", "2"] and rm.subject_ids.tolist() == ["m1", "m2"]

    def test_frequency_patterns(self, shared_data):
        rm = ResponseMatrix.read(shared_data / "classic" / "lsat7_patterns.csv", freq_column="freq")
        assert rm.n_items == 5 and rm.weights.sum() == 1000
        full = rm.expand()
        assert full.n_subjects == 1000 and full.weights is None
        assert_allclose(full.item_means, rm.item_means)

    def test_aligned_values(self):
        rm = ResponseMatrix([[1, 0], [0, 1]], ["m1", "m2"], ["a", "b"])
        out = rm.aligned_values(["b", "z", "a"])
        assert_array_equal(out[:, [0, 2]], [[0, 1], [1, 0]]) and np.isnan(out[:, 1]).all()
        with pytest.raises(ResponseDataError, match="not in the bank"):
            rm.aligned_values(["a"])
        assert rm.aligned_values(["a"], extra="ignore").shape == (2, 1)


class TestValidation:
    def test_duplicate_subject_names_rows(self, tmp_path):
        path = write(tmp_path, "model,a,b\nm1,1,0\nm2,0,1\nm1,1,1\n")
        with pytest.raises(ResponseDataError,
                           match=r"duplicate subject id 'm1' at rows \[0, 2\]") as err:
            ResponseMatrix.read(path)
        assert "identical" not in str(err.value)      # m1's two rows differ

    def test_a_pattern_table_read_without_its_freq_column_is_told_to_give_it(self, tmp_path):
        """LSAT7-style patterns (item columns then a count) read as a matrix: the first item's
        0/1 are taken for model ids and repeat; the line names the count column's option."""
        path = write(tmp_path, "item1,item2,item3,freq\n0,0,0,12\n0,0,1,19\n1,0,1,7\n"
                               "1,1,1,40\n")
        with pytest.raises(ResponseDataError) as err:
            ResponseMatrix.read(path)
        msg = str(err.value)
        assert "holds 0/1 scores, not model ids" in msg and "--freq-column freq" in msg
        assert "merge or rename" not in msg
        rm = ResponseMatrix.read(path, freq_column="freq")      # as told: it reads
        assert rm.n_subjects == 4 and rm.subject_weights().sum() == 78

    def test_an_id_repeated_on_many_rows_names_the_first_few_and_the_count(self, tmp_path):
        """An expanded pattern table (mirt's expand.table of LSAT7 written without ids) repeats
        its first column's 0 on hundreds of rows: the line names five of them and the count."""
        rows = "".join(f"{i % 2},{(i // 2) % 2},1\n" for i in range(400))
        path = write(tmp_path, "item1,item2,item3\n" + rows)
        with pytest.raises(ResponseDataError) as err:
            ResponseMatrix.read(path)
        msg = str(err.value)
        assert "at rows [0, 2, 4, 6, 8, ...] (200 rows)" in msg and len(msg) < 300

    def test_duplicate_subjects_with_identical_rows_say_so(self, tmp_path):
        path = write(tmp_path, "model,a,b\nm1,1,\nm2,0,1\nm1,1,\nm2,0,0\n")
        with pytest.raises(ResponseDataError, match=r"2 duplicated id\(s\) in all.*1 of them "
                           r"repeat identical rows: keep one of each"):
            ResponseMatrix.read(path)

    def test_duplicate_item_names_columns(self, tmp_path):
        path = write(tmp_path, "model,a,b,a\nm1,1,0,1\n")
        with pytest.raises(ResponseDataError, match=r"duplicate item id 'a'.*columns \[1, 3\]"):
            ResponseMatrix.read(path)

    def test_value_two_names_cell(self, tmp_path):
        path = write(tmp_path, "model,a,b\nm1,1,0\nm2,2,1\n")
        with pytest.raises(ResponseDataError) as err:
            ResponseMatrix.read(path)
        msg = str(err.value)
        assert "value 2" in msg and "row 1" in msg and "'m2'" in msg and "column 'a'" in msg

    def test_text_cell_names_cell(self, tmp_path):
        path = write(tmp_path, "model,a,b\nm1,1,0\nm2,1,yes\n")
        with pytest.raises(ResponseDataError) as err:
            ResponseMatrix.read(path)
        msg = str(err.value)
        assert "text cell 'yes'" in msg and "'m2'" in msg and "column 'b'" in msg
        assert "drop it" not in msg               # a stray cell in an item column

    def test_a_text_column_is_told_to_go(self, tmp_path):
        """A label column beside the model ids (a family, a date) is not an item: the line says
        which column holds no score and to drop it."""
        path = write(tmp_path, "model,family,a,b\nm1,llama,1,0\nm2,qwen,1,1\n")
        with pytest.raises(ResponseDataError) as err:
            ResponseMatrix.read(path)
        msg = str(err.value)
        assert "text cell 'llama'" in msg and "column 'family' holds no score" in msg
        assert msg.endswith("so drop it")

    def test_empty_file(self, tmp_path):
        with pytest.raises(ResponseDataError, match="empty"):
            ResponseMatrix.read(write(tmp_path, ""))
        with pytest.raises(ResponseDataError, match="no subject rows"):
            ResponseMatrix.read(write(tmp_path, "model,a,b\n", "h.csv"))
        with pytest.raises(ResponseDataError, match="empty"):
            ResponseMatrix(np.zeros((0, 3)))

    def test_negative_value(self):
        with pytest.raises(ResponseDataError, match="outside \\[0, 1\\] at row 0"):
            ResponseMatrix([[-0.5, 1.0]])

    def test_unsupported_extension(self, tmp_path):
        with pytest.raises(ResponseDataError, match="unsupported file type"):
            ResponseMatrix.read(write(tmp_path, "x", "r.xlsx"))


class TestBinarize:
    def test_binarize_keeps_missing(self):
        rm = ResponseMatrix([[0.2, 0.8, np.nan], [0.5, 0.51, 1.0]])
        out = rm.binarize(0.5).values
        assert_array_equal(out[:, :2], [[0, 1], [0, 1]]) and np.isnan(out[0, 2])
        assert rm.binarize(0.5).is_binary and not rm.is_binary

    def test_tinybenchmarks_threshold_recovers_calibrated_cut(self, rng):
        # partial scores y = clip(z + noise) where the binarized mean matches the mean at c ~ 0.5
        latent = rng.random((300, 200))
        rm = ResponseMatrix(latent)
        c = tinybenchmarks_threshold(rm)
        gap = np.abs((latent > c).mean(1) - latent.mean(1)).mean()
        for other in (0.2, 0.35, 0.65, 0.8):
            assert gap <= np.abs((latent > other).mean(1) - latent.mean(1)).mean()
        assert abs(c - 0.5) <= 0.02
        # y = x^3 has mean 1/4; P(x^3 > c) = 1 - c^(1/3) equals 1/4 at c = 0.75^3 = 0.42
        assert abs(tinybenchmarks_threshold(ResponseMatrix(latent**3)) - 0.75**3) <= 0.02


def test_a_file_that_repeats_identical_rows_keeps_one_of_each(tmp_path):
    """A leaderboard export listing a model twice with the same answers (BenchPred's v2 MuSR:
    19 such ids) reads with a warning, one row per model; answers that differ still refuse."""
    path = tmp_path / "dup.csv"
    path.write_text("model,a,b\nm1,1,\nm2,0,1\nm1,1,\nm3,1,1\nm2,0,1\n")
    with pytest.warns(UserWarning, match=r"2 subject id\(s\) repeat an identical row \(2 "
                      r"row\(s\) in all, e.g. 'm1'\): kept the first of each"):
        rm = ResponseMatrix.read(path)
    assert list(rm.subject_ids) == ["m1", "m2", "m3"]
    np.testing.assert_array_equal(rm.values, [[1, np.nan], [0, 1], [1, 1]])
    path.write_text("model,a,b\nm1,1,\nm2,0,1\nm1,1,\nm2,0,0\n")
    with pytest.raises(ResponseDataError, match="duplicate subject id"):
        ResponseMatrix.read(path)
