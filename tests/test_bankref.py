"""One BankRef behind every --bank: each kind (shipped name, bank file, bank folder, suite)
resolves to the same reference from every command, and each bad --bank is the same one line."""
from __future__ import annotations

import pytest

from atlascat.catalogue import KINDS, BankRef
from atlascat.catalogue import bankref as bankref_module
from atlascat.cli import main
from atlascat.cli._common import cli_advice
from atlascat.errors import BankError

#: every command that reads a bank, with the argument list around the bank spec ``{}``, the
#: option its errors name and the kinds it takes
COMMANDS = {
    "score": (["score", "arc", "--bank", "{}"], "--bank", None),
    "fit": (["fit", "arc", "--bank", "{}"], "--bank", None),
    "items": (["items", "arc", "--bank", "{}"], "--bank", None),
    "ranks": (["ranks", "arc", "--bank", "{}"], "--bank", None),
    "simulate": (["simulate", "arc", "--bank", "{}", "-o", "{out}"], "--bank", None),
    "design": (["design", "--bank", "{}", "-k", "5"], "--bank", None),
    "evaluate": (["evaluate", "--bank", "{}", "--subject", "simulate:0.5", "--llm", "m",
                  "--db", "{out}/runs.sqlite"], "--bank", None),
    "link REF": (["link", "{}", "paper-arc", "-o", "{out}/linked.csv"], "REF", None),
    "info": (["info", "{}"], "PATH", KINDS),
}


def _argv(template, spec, out):
    return [a.replace("{}", str(spec)).replace("{out}", str(out)) for a in template]


class _Seen(BankError):
    pass


@pytest.fixture
def folder(tmp_path):
    """A bank folder (atlas build-bank's layout) made from the shipped arc bank and link."""
    from atlascat.bankdir import write_bank_dir
    from atlascat.catalogue import load_content_bank, load_score_link

    return write_bank_dir(tmp_path / "folder", load_content_bank("arc"), load_score_link("arc"),
                          {"benchmark": "arc"})


@pytest.fixture
def bank_file(tmp_path):
    from atlascat.catalogue import load_paper_bank

    return load_paper_bank("arc").write(tmp_path / "bank.csv")


def test_each_kind_decodes_to_one_reference(folder, bank_file, tmp_path):
    assert BankRef.from_option("ARC") == BankRef("shipped", "arc")
    assert BankRef.from_option("paper-arc") == BankRef("shipped", "paper-arc")
    assert BankRef.from_option(str(bank_file)) == BankRef("file", str(bank_file.resolve()))
    assert BankRef.from_option(str(folder)) == BankRef("dir", str(folder.resolve()))
    assert BankRef.from_option("openllm-v1", kinds=KINDS) == BankRef("suite", "openllm-v1")
    for ref in (BankRef.from_option("arc"), BankRef.from_option(str(folder)),
                BankRef.from_option("openllm-v1", kinds=KINDS)):
        assert BankRef.parse(str(ref)) == ref          # the stored form reads back
    # what a reference carries, loaded once
    shipped, folder_ref = BankRef.from_option("arc"), BankRef.from_option(str(folder))
    assert shipped.load() is shipped.load()
    assert list(folder_ref.load().item_ids) == list(shipped.load().item_ids)
    assert folder_ref.folder().manifest["benchmark"] == "arc" and folder_ref.bench == "arc"
    assert shipped.link is not None and folder_ref.link is folder_ref.folder().link
    assert BankRef.from_option("paper-arc").link is None
    assert BankRef.from_option(str(bank_file)).link is None
    suite = BankRef.from_option("openllm-v1", kinds=KINDS)
    assert suite.suite_file.name == "openllm-v1.json" and suite.link is None
    assert str(suite.load().item_ids[0]).split("/")[0] in ("arc", "hellaswag", "mmlu",
                                                              "truthfulqa", "winogrande", "gsm8k")


def test_a_changed_file_is_read_again(tmp_path):
    from atlascat.catalogue import load_paper_bank

    path = load_paper_bank("arc").subset(["514", "516"]).write(tmp_path / "b.csv")
    ref = BankRef.from_option(str(path))
    assert len(ref.load()) == 2
    load_paper_bank("arc").subset(["514"]).write(path)
    assert len(ref.load()) == 1


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_decodes_each_kind_the_same(command, folder, bank_file, tmp_path,
                                                  monkeypatch, capsys):
    """The reference each command loads is BankRef.from_option of what the user typed (a bank
    file's ``normalize_ids`` is the command's --normalize-ids)."""
    template, option, kinds = COMMANDS[command]
    seen = []

    def load(self):
        seen.append(self)
        raise _Seen("seen")

    monkeypatch.setattr(BankRef, "load", load)
    for spec in ("arc", "paper-arc", str(bank_file), str(folder)):
        seen.clear()
        assert main(_argv(template, spec, tmp_path)) == 2
        err = capsys.readouterr().err
        assert seen, f"{command} --bank {spec}: the bank was not loaded through BankRef ({err})"
        want = BankRef.from_option(spec, option=option)
        assert (seen[0].kind, seen[0].name) == (want.kind, want.name), (command, spec)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_says_each_bank_error_in_one_same_line(command, tmp_path, capsys):
    template, option, kinds = COMMANDS[command]
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = ["nope", str(empty)] + ([] if kinds else ["openllm-v1"])
    for spec in bad:
        with pytest.raises(BankError) as exc:
            BankRef.from_option(spec, option=option, kinds=kinds or ("shipped", "file", "dir"))
        assert main(_argv(template, spec, tmp_path)) == 2
        err = capsys.readouterr().err
        advice = cli_advice(exc.value)
        assert err.strip() == f"error: {exc.value}" + (f"; {advice}" if advice else ""), \
            (command, spec)
        assert "\n" not in err.strip()
    assert "is neither an existing file nor a bundled bank" in str(
        pytest.raises(BankError, BankRef.from_option, "nope").value)


def test_the_errors_say_what_to_give_instead(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [("nope", {}, ["--bank 'nope' is neither", "paper-arc", "openllm-v1"], []),
             (str(empty), {}, ["--bank", "not a bank folder (no manifest.json)"],
              ["atlas build-bank"]),
             ("openllm-v1", {}, ["is a suite, not one bank"], ["--suite"]),
             ("arc", {"option": "--suite", "kinds": ("suite",)},
              ["--suite 'arc' is a bank, not a suite", "openllm-v1"], ["--bank"])]
    for spec, kw, parts, cli_parts in cases:
        with pytest.raises(BankError) as exc:
            BankRef.from_option(spec, **kw)
        for part in parts:
            assert part in str(exc.value), (spec, str(exc.value))
        for part in cli_parts:        # the command line adds the command that fixes it
            assert part not in str(exc.value) and part in cli_advice(exc.value)
    with pytest.raises(BankError, match="no longer exists"):
        BankRef.parse(str(tmp_path / "gone.csv")).load()


def test_suite_option_goes_through_bankref(tmp_path, capsys):
    assert main(["simulate", "--suite", "arc", "arc=arc", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    exc = pytest.raises(BankError, BankRef.from_option, "arc", option="--suite",
                        kinds=("suite",)).value
    assert err == f"error: {exc}; {cli_advice(exc)}"


def test_no_other_module_decodes_a_bank_spec():
    """Only catalogue/bankref.py reads a --bank spec: no other module calls the folder test or
    the bundled-name test on a user's string."""
    import re
    from pathlib import Path

    pkg = Path(bankref_module.__file__).resolve().parents[1]
    offenders = []
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg).as_posix()
        if rel in ("catalogue/bankref.py", "catalogue/banks.py", "catalogue/__init__.py") or \
                rel.startswith("bankdir/"):  # the folder's own reader, and the builder's
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\b(is_bank_dir|is_bundled_name|load_bank_dir)\(", text):
            offenders.append(rel)
    assert offenders == []
