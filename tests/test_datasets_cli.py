"""Bundled data loaders and the `atlas` CLI basics (info, version, errors)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from atlascat import AtlasError, __version__, catalogue
from atlascat.cli import main


class TestDatasets:
    def test_responses(self):
        rm = catalogue.load_responses("arc")
        assert rm.shape == (2193, 317) and rm.is_binary

    @pytest.mark.parametrize("bench,n", [("arc", 839), ("gsm8k", 1306), ("hellaswag", 5600),
                                         ("truthfulqa", 627), ("winogrande", 1045)])
    def test_banks_match_published_sizes(self, bench, n):
        bank = catalogue.load_paper_bank(bench)
        assert len(bank) == n and bank.model == "3pl"
        assert not any(i.startswith("X") for i in bank.item_ids[:20])
        thetas = catalogue.load_test_thetas(bench)
        assert list(thetas.columns) == ["subject_id", "theta", "se"] and len(thetas) > 300
        assert {"subject_id", "accuracy"} <= set(catalogue.load_test_accuracy(bench).columns)
        assert "RMSEA" in catalogue.load_m2_partitions(bench).columns

    def test_bank_ids_join_the_matrix(self):
        rm, bank = catalogue.load_responses("arc"), catalogue.load_paper_bank("arc")
        shared = set(rm.item_ids) & set(bank.item_ids)
        assert len(shared) > 250

    def test_items_content(self):
        items = catalogue.load_items("arc")
        assert {"item_id", "question", "choices", "answerKey"} <= set(items.columns)

    def test_unknown_benchmark(self):
        with pytest.raises(AtlasError, match="unknown benchmark 'nope'"):
            catalogue.load_paper_bank("nope")

    def test_package_data_is_small(self):
        total = sum(p.stat().st_size for p in catalogue.data_path("README.md").parent.iterdir())
        assert total <= 5 * 1024 * 1024


class TestCLI:
    def test_version(self, capsys):
        assert main(["--version"]) == 0
        assert __version__ in capsys.readouterr().out

    def test_info_union_gsm8k(self, shared_data, capsys):
        assert main(["info", str(shared_data / "openllm" / "union_gsm8k.csv.gz"), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["subjects"] == 4783 and out["items"] == 1189
        assert 0.6 < out["missing_fraction"] < 0.65
        assert out["items_without_response"] == 4

    def test_info_bank(self, shared_data, capsys):
        assert main(["info", str(shared_data / "atlas_banks" / "arc_3pl_bank.csv"), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["n_items"] == 839 and out["model"] == "3pl"
        bank = catalogue.load_paper_bank("arc")
        assert len(out["nonpositive_a"]) == int(np.sum(bank.a <= 0))

    def test_info_suite_lists_its_members_not_one_pooled_bank(self, capsys):
        """A suite's members are on their own theta scales: ``atlas info openllm-v1`` lists
        each (items, IRT model, weight), and --theta on it is one line pointing at a member."""
        assert main(["info", "openllm-v1", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["kind"] == "suite" and "quantiles" not in out
        names = [m["name"] for m in out["members"]]
        assert names == ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"]
        for m in out["members"]:
            bank = catalogue.load_bank(m["name"])
            assert (m["n_items"], m["model"]) == (len(bank), bank.model)
            assert m["weight"] == pytest.approx(1 / 6)
        assert out["n_items"] == sum(m["n_items"] for m in out["members"])
        assert main(["info", "openllm-v1"]) == 0
        text = capsys.readouterr().out
        assert "suite of 6 benchmarks" in text and "gsm8k: 484 items, model 2pl" in text
        assert main(["info", "openllm-v1", "--theta", "0"]) == 2
        err = capsys.readouterr().err
        assert "own theta scale" in err and "atlas info arc --theta" in err
        assert len(err.strip().splitlines()) == 1

    def test_info_suite_file_reads_it_as_the_suite(self, tmp_path, capsys):
        """A suite's JSON file (what --suite takes) is described as its suite; a broken one
        is one line (it was refused as an unsupported file type)."""
        from atlascat.catalogue.suites import suite_path

        path = tmp_path / "mine.json"
        path.write_text(suite_path("openllm-v1").read_text())
        assert main(["info", str(path), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["kind"] == "suite" and len(out["members"]) == 6
        path.write_text("{}")
        assert main(["info", str(path)]) == 2
        err = capsys.readouterr().err
        assert "a suite needs 'members'" in err and len(err.strip().splitlines()) == 1

    def test_bad_input_is_one_line_error(self, tmp_path, capsys):
        path = tmp_path / "bad.csv"
        path.write_text("model,q1\nm1,2\n")
        assert main(["info", str(path)]) == 2
        err = capsys.readouterr().err
        assert "error:" in err and "outside [0, 1]" in err and "Traceback" not in err

    def test_console_script_help(self):
        out = subprocess.run([sys.executable, "-m", "atlascat", "--help"], capture_output=True,
                             text=True, check=True).stdout
        assert "info" in out


def test_lazy_public_names_resolve_to_objects():
    import atlascat

    assert callable(atlascat.calibrate) and not isinstance(atlascat.calibrate, type(atlascat))
    assert atlascat.catalogue.load_paper_bank is catalogue.load_paper_bank
    assert atlascat.CATSession.__name__ == "CATSession"
