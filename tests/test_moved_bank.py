"""A bank folder moved after its runs: `atlas runs` still lists every run (a predictor run
keeps its score, read from its stored session), and a run that needs the bank says so in one
line instead of the listing failing as a whole."""
from __future__ import annotations

import json

import atlascat as at
from atlascat.cli import main


def test_runs_of_a_moved_bank_folder_are_still_listed(tmp_path, capsys):
    rm = at.catalogue.load_responses("arc")
    rm.subset(subjects=range(0, 2193, 60), items=range(80)).write(tmp_path / "mine.csv")
    bank = tmp_path / "bank"
    assert main(["build-bank", str(tmp_path / "mine.csv"), "-o", str(bank), "--name", "mine",
                 "--budget", "20", "--chance", "0.25", "-q"]) == 0
    db = tmp_path / "runs.sqlite"
    model = str(rm.subject_ids[5])
    for design in ("predictor", "adaptive"):
        assert main(["evaluate", "--bank", str(bank), "--subject", f"replay:arc#{model}",
                     "--design", design, "--db", str(db), "-q"]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    before = {r["kind"]: r for r in json.loads(capsys.readouterr().out)}
    bank.rename(tmp_path / "moved")
    assert main(["runs", "--db", str(db), "--json"]) == 0, capsys.readouterr().err
    after = {r["kind"]: r for r in json.loads(capsys.readouterr().out)}
    assert after["predictor"]["prediction"]["score"] == before["predictor"]["prediction"]["score"]
    assert "no longer exists" in after["adaptive"]["prediction"]["note"]
    assert main(["runs", "--db", str(db)]) == 0
    code = main(["compare-models", after["adaptive"]["run_id"], after["predictor"]["run_id"],
                 "--db", str(db)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "no longer exists" in err and "\n" not in err, err


def test_a_run_resumed_on_its_moved_folder_remembers_where_it_is(tmp_path, capsys):
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun, design_bank
    from atlascat.live.subjects import SubjectSpec

    rm = at.catalogue.load_responses("arc")
    rm.subset(subjects=range(0, 2193, 60), items=range(80)).write(tmp_path / "mine.csv")
    assert main(["build-bank", str(tmp_path / "mine.csv"), "-o", str(tmp_path / "bank"),
                 "--name", "mine", "--budget", "20", "--chance", "0.25", "-q"]) == 0
    ref, db = BankRef.from_option(str(tmp_path / "bank")), tmp_path / "runs.sqlite"
    spec = SubjectSpec.parse(f"replay:arc#{rm.subject_ids[5]}")
    live = LiveRun.start(db, ref, [spec.build(design_bank(ref, "predictor"))])
    rid = live.jobs[0].run_id                     # started, nothing asked yet
    live.close()
    (tmp_path / "bank").rename(tmp_path / "moved")
    capsys.readouterr()
    assert main(["evaluate", "--resume", rid, "--db", str(db), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no longer exists; pass the folder where it is now (--bank)" in err, err
    assert main(["evaluate", "--resume", rid, "--db", str(db), "--bank",
                 str(tmp_path / "moved"), "-q"]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)[0]
    assert run["bank_ref"] == str((tmp_path / "moved").resolve())
    assert run["prediction"]["benchmark"] == "mine" and "percentile" in run["prediction"]


def test_runs_of_a_bank_file_changed_since_are_still_listed(tmp_path, capsys):
    """A bank file edited after its run into one that no longer reads (a column twice):
    `atlas runs` lists every run, that one with a note, instead of failing as a whole."""
    bank = tmp_path / "bank.csv"
    at.load_bank("arc").to_frame().to_csv(bank, index=False)
    db = tmp_path / "runs.sqlite"
    for theta in ("0.3", "0.9"):
        assert main(["evaluate", "--bank", str(bank), "--subject", f"simulate:{theta}",
                     "--max-items", "8", "--min-items", "4", "--db", str(db), "-q"]) == 0
    bank.write_text("item_id,a,a\n1,2,3\n")
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0, capsys.readouterr().err
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2
    assert all("can no longer be read" in r["prediction"]["note"] for r in rows)
    assert all(r["theta"] is not None for r in rows)     # each run keeps its theta +- SE
    assert main(["runs", "--db", str(db)]) == 0
    assert main(["runs", "--db", str(db), "--run", rows[0]["run_id"]]) == 0
