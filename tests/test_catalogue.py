"""The catalogue: one name, one bank in Python and in the CLI; old import paths keep working
with a DeprecationWarning that names the new place."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from conftest import HANG_S

from atlascat import catalogue
from atlascat.errors import AtlasError, BankError, ResponseDataError


def test_load_bank_takes_the_clis_names():
    content = catalogue.load_bank("hellaswag")
    paper = catalogue.load_bank("paper-hellaswag")
    assert len(paper) == 5600 and paper.metadata is None or "choices" not in paper.metadata
    assert 30 <= len(content) < 200 and "choices" in content.metadata.columns
    for name, bank in (("hellaswag", content), ("paper-hellaswag", paper)):
        assert list(bank.item_ids) == list(catalogue.BankRef.from_option(name).load().item_ids)
    assert len(catalogue.load_bank("mmlu")) > 0          # failed before: the paper has no MMLU bank
    assert list(catalogue.load_paper_bank("arc").item_ids) == list(
        catalogue.load_bank("paper-arc").item_ids)


def test_unknown_bank_name_lists_the_names():
    with pytest.raises(BankError, match="paper-arc") as err:
        catalogue.load_bank("nope")
    assert "hellaswag" in str(err.value)
    with pytest.raises(AtlasError, match="unknown benchmark"):
        catalogue.load_paper_bank("mmlu")


def test_cli_and_python_agree_on_a_name(tmp_path):
    from typer.testing import CliRunner

    from atlascat.cli import app

    for name in ("hellaswag", "paper-hellaswag"):
        out = CliRunner().invoke(app, ["info", name])
        assert out.exit_code == 0, out.output
        assert f"item bank, {len(catalogue.load_bank(name))} items" in out.output


@pytest.mark.parametrize("old", ["atlascat.studies.score_link", "atlascat.live.items",
                                 "atlascat.live.requests", "atlascat._moved"])
def test_moved_modules_are_gone(old):
    """No shims in an unreleased package (issue 28, item 5; CHANGELOG.md says what moved)."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    import atlascat.datasets

    assert not hasattr(atlascat.datasets, "load_bank")   # the data folder only


def test_library_reads_a_bundled_matrix_by_name_through_the_catalogue():
    from atlascat.responses import as_response_matrix

    rm = as_response_matrix("truthfulqa")
    assert rm.n_subjects == catalogue.load_responses("truthfulqa").n_subjects
    with pytest.raises(ResponseDataError, match="'nope'"):
        as_response_matrix("nope")


def test_without_the_catalogue_a_name_is_a_clear_error(monkeypatch):
    from atlascat import responses

    monkeypatch.setattr(responses, "_NAME_RESOLVER", None)
    with pytest.raises(ResponseDataError, match="atlascat.catalogue.load_responses"):
        responses.as_response_matrix("arc")
    arr = responses.as_response_matrix(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert arr.n_items == 2


def test_the_package_imports_without_deprecation_warnings(tmp_path):
    import subprocess
    import sys

    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "import atlascat.cli, atlascat.live, atlascat.live.runner, atlascat.live.mockserver\n"
            "import atlascat.cli.cmd_evaluate, atlascat.cli.cmd_simulate, atlascat.demo\n"
            "from atlascat.live import build_item_requests, load_content_bank, build_prompt\n"
            "import atlascat as at; at.load_bank('arc'); at.catalogue.load_score_link('arc')\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=HANG_S)
    assert out.returncode == 0, out.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert out.stdout.strip() == "ok"
