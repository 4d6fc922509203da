"""Plain option values converted without pydantic (atlascat.cli._params): the value typer's
own conversion gives, and typer's own conversion (and message) for every other value."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List

import pytest

typer_coercion = pytest.importorskip("typer._coercion")
from typer.models import OptionInfo  # noqa: E402

from atlascat.cli import main  # noqa: E402
from atlascat.cli._params import NOT_PLAIN, plain_kind, plain_value  # noqa: E402

VALUES = ["0", "7", "-3", "+4", "007", "10.0", "1e3", "-0.5", ".5", "5.", "2.5E-07", " 1", "1 ",
          "1_000", "abc", "", "nan", "inf", "0x10", "1e", "--1", "résumé", "a,b", "x/y.csv",
          "NA", "true", "1" * 40]


def _typer(annotation, value):
    """Typer's own conversion (its pydantic adapter)."""
    desc = typer_coercion.resolve_type_descriptor(annotation, OptionInfo())
    try:
        return typer_coercion.build_runtime_param(desc)._coerce_value(value, param=None, ctx=None)
    except Exception as exc:  # noqa: BLE001 - compared by kind: the plain path must defer
        return type(exc)


@pytest.mark.parametrize("annotation", [str, int, float, bool])
def test_plain_values_are_typers(annotation):
    assert plain_kind(annotation, OptionInfo())
    for value in VALUES + [0, 1, 2.5, True, False]:
        got = plain_value(annotation, value)
        if got is not NOT_PLAIN:
            want = _typer(annotation, value)
            assert got == want and type(got) is type(want), (annotation, value, got, want)
    assert plain_value(int, "7") == 7 and plain_value(float, "2.5E-07") == 2.5e-07
    assert plain_value(int, "10.0") is NOT_PLAIN and plain_value(float, "nan") is NOT_PLAIN


def test_plain_paths_and_lists(tmp_path):
    (tmp_path / "f.csv").write_text("x\n")
    for value in [str(tmp_path / "f.csv"), str(tmp_path / "missing.csv"), str(tmp_path)]:
        got = plain_value(Path, value)
        assert got == _typer(Path, value) == Path(value) and isinstance(got, Path)
    assert plain_value(Path, "") is NOT_PLAIN
    if os.geteuid() != 0:
        (tmp_path / "f.csv").chmod(0)
        assert plain_value(Path, str(tmp_path / "f.csv")) is NOT_PLAIN
    assert plain_value(List[str], ("a", "b")) == ["a", "b"] == _typer(List[str], ("a", "b"))
    assert plain_value(List[str], ()) == [] == _typer(List[str], ())


def test_bounds_and_checks_are_not_plain():
    assert not plain_kind(int, OptionInfo(min=1))
    assert not plain_kind(Path, OptionInfo(exists=True))
    assert not plain_kind(str, OptionInfo(parser=str.upper))
    assert not plain_kind(List[int], OptionInfo())


def test_malformed_values_get_typers_messages(tmp_path, capsys):
    assert main(["simulate", "--bank", "arc", "--thetas", "t.csv", "--seed", "1.5",
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "integer" in err
    assert main(["simulate", "--bank", "arc", "--thetas", "t.csv", "--batch-size", "0",
                 "-o", str(tmp_path / "o")]) == 2
    assert "--batch-size" in capsys.readouterr().err


def test_another_typer_layer_keeps_typers_conversion():
    """The hook installs only on the conversion layer it was written against."""
    import dataclasses

    from typer._coercion import RuntimeParam
    from typer.core import _TyperParameter

    from atlascat.cli._params import layer_as_expected

    assert layer_as_expected(RuntimeParam, _TyperParameter)

    @dataclasses.dataclass(frozen=True)
    class Wider:
        parameter_info: object
        annotation: object
        converter: object

        def _coerce_value(self, value, param, ctx):
            return value

    class NoRuntime:
        type_descriptor: object

    assert not layer_as_expected(Wider, _TyperParameter)
    assert not layer_as_expected(RuntimeParam, NoRuntime)
    assert not layer_as_expected(object, _TyperParameter)
