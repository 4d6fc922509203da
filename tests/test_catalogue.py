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
    assert list(content.item_ids) == list(catalogue.resolve_bank("hellaswag").item_ids)
    assert list(paper.item_ids) == list(catalogue.resolve_bank("paper-hellaswag").item_ids)
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


def test_old_load_bank_keeps_the_papers_meaning_with_a_warning():
    datasets = importlib.import_module("atlascat.datasets")
    datasets.__dict__.pop("load_bank", None)   # the first use warns; later uses are cached
    with pytest.warns(DeprecationWarning, match="atlascat.catalogue.load_paper_bank"):
        old = datasets.load_bank
    assert len(old("hellaswag")) == 5600


@pytest.mark.parametrize("old, name, new", [
    ("atlascat.evaluate.score_link", "ScoreLink", "atlascat.link.score_link"),
    ("atlascat.evaluate.score_link", "load_score_link", "atlascat.catalogue.links"),
    ("atlascat.evaluate.score_link", "_isotonic", "atlascat.link.curve"),
    ("atlascat.live.items", "build_prompt", "atlascat.content.items"),
    ("atlascat.live.items", "load_content_bank", "atlascat.catalogue.banks"),
    ("atlascat.live.requests", "build_item_requests", "atlascat.content.requests"),
    ("atlascat.datasets", "resolve_responses", "atlascat.catalogue.matrices"),
])
def test_moved_names_warn_and_are_the_same_object(old, name, new):
    mod = importlib.import_module(old)
    mod.__dict__.pop(name, None)
    with pytest.warns(DeprecationWarning, match=name):
        value = getattr(mod, name)
    target = importlib.import_module(new)
    assert value is getattr(target, name.lstrip("_")) or value is getattr(target, name)
    with pytest.raises(AttributeError):
        getattr(mod, "no_such_name")


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
