"""A bad-input walk over every command, beyond the catalogue of ``test_malformed_inputs.py``:
each case ends with exit code 2 and one line on stderr naming the culprit, and leaves the
user's files as they were (nothing already done is lost)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt.bank import ItemBank

IDS = [f"q{j}" for j in range(12)]


@pytest.fixture()
def ws(tmp_path):
    rng = np.random.default_rng(5)
    bank = ItemBank(IDS, rng.uniform(0.8, 2.0, 12), np.linspace(-1.5, 1.5, 12))
    bank.write(tmp_path / "bank.csv")
    bank.write(tmp_path / "bank.parquet")
    p = bank.probability(np.random.default_rng(6).normal(size=60))
    y = (np.random.default_rng(7).random(p.shape) < p).astype(int)
    resp = pd.DataFrame(y, columns=IDS)
    resp.insert(0, "model", [f"m{i}" for i in range(60)])
    resp.to_csv(tmp_path / "resp.csv", index=False)
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [0.5, -1.0]}).to_csv(tmp_path / "th.csv",
                                                                          index=False)
    (tmp_path / "adir").mkdir()
    (tmp_path / "th_semi.csv").write_text("subject_id;theta\na;0.5\nb;1\n")
    (tmp_path / "battles.csv").write_text("model_a,model_b,winner\nx,y,model_a\ny,z,tie\n"
                                          "z,x,model_b\n")
    return tmp_path


def _refused(argv, needles, capsys):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, (argv, rc, err)
    assert "\n" not in err and err.startswith("error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# (argv with {d} = workspace, the file that must survive unchanged, needles)
OVERWRITE_CASES = [
    ("calibrate {d}/resp.csv -o {d}/resp.csv --model 2pl", "resp.csv", ["RESPONSES", "-o/--output"]),
    ("score {d}/resp.csv --bank {d}/bank.csv -o {d}/bank.csv", "bank.csv", ["--bank", "another name"]),
    ("fit {d}/resp.csv --bank {d}/bank.csv -o {d}/resp.csv", "resp.csv", ["RESPONSES"]),
    ("items {d}/resp.csv --bank {d}/bank.csv -o {d}/./bank.csv", "bank.csv", ["--bank"]),
    ("link {d}/bank.csv {d}/bank.parquet -o {d}/bank.parquet", "bank.parquet", ["NEW"]),
    ("design --bank {d}/bank.csv -k 3 -o {d}/bank.csv", "bank.csv", ["--bank"]),
    ("design --bank {d}/bank.csv -k 3 --thetas {d}/th.csv -o {d}/th.csv", "th.csv", ["--thetas"]),
    ("ranks {d}/resp.csv --bank {d}/bank.csv -o {d}/resp.csv", "resp.csv", ["DATA"]),
    ("anova {d}/resp.csv --model 1pl --model 2pl -o {d}/resp.csv", "resp.csv", ["RESPONSES"]),
    ("info {d}/bank.csv --theta 0 --item-information {d}/bank.csv", "bank.csv",
     ["--item-information", "PATH"]),
]


@pytest.mark.parametrize("argv,keep,needles", OVERWRITE_CASES,
                         ids=[c[0].split()[0] + str(i) for i, c in enumerate(OVERWRITE_CASES)])
def test_output_that_is_an_input_is_refused_before_it_is_overwritten(ws, capsys, argv, keep,
                                                                     needles):
    before = (ws / keep).read_bytes()
    _refused(argv.format(d=ws).split(), ["is the", "destroy that input", *needles], capsys)
    assert (ws / keep).read_bytes() == before


def test_two_outputs_of_one_run_on_one_file_are_refused(ws, capsys):
    for extra in (["--scores", str(ws / "o.csv")], ["--summary", str(ws / "sub" / ".." / "o.csv")]):
        _refused(["calibrate", str(ws / "resp.csv"), "-o", str(ws / "o.csv"), *extra],
                 [extra[0], "is also -o", "its own file"], capsys)
    assert not (ws / "o.csv").exists()


def test_item_information_into_a_directory_is_one_line(ws, capsys):
    _refused(["info", str(ws / "bank.csv"), "--theta", "0", "--item-information",
              str(ws / "adir")], ["--item-information", "is a directory"], capsys)


# (argv with {d} = workspace, strings the one-line message must contain)
WALK_CASES = [
    ("score-prior-mean-off-grid", "score {d}/resp.csv --bank {d}/bank.csv --prior-mean 1e300",
     ["--prior-mean", "1e+300", "outside the theta range [-6, 6]"]),
    ("score-prior-mean-beyond-grid-map", "score {d}/resp.csv --bank {d}/bank.csv -m map --prior-mean 7",
     ["--prior-mean", "mean inside it"]),
    ("score-lambda-without-gpirt", "score {d}/resp.csv --bank {d}/bank.csv --lambda 0.5",
     ["--lambda", "--reconstruct gpirt"]),
    ("score-calibration-with-pirt", "score {d}/resp.csv --bank {d}/bank.csv --reconstruct pirt "
     "--calibration {d}/resp.csv", ["--calibration", "--reconstruct pirt does not use"]),
    ("score-negative-seed", "score {d}/resp.csv --bank {d}/bank.csv --seed -1", ["--seed", ">= 0"]),
    ("fit-negative-seed", "fit {d}/resp.csv --bank {d}/bank.csv --partition-size 6 --seed -1",
     ["--seed", ">= 0"]),
    ("items-a-min-nan", "items --bank {d}/bank.csv --a-min nan", ["--a-min", "finite"]),
    ("items-alpha-above-1", "items --bank {d}/bank.csv --alpha 2", ["--alpha", "(0, 1)"]),
    ("items-c-max-negative", "items --bank {d}/bank.csv --c-max -1", ["--c-max", "[0, 1]"]),
    ("items-u-min-above-1", "items --bank {d}/bank.csv --u-min 5", ["--u-min", "[0, 1]"]),
    ("items-c-warn-above-c-max", "items --bank {d}/bank.csv --c-warn 0.9 --c-max 0.5",
     ["--c-warn", "--c-max", "c_warn <= c_max"]),
    ("benchmark-tau-nan", "benchmark {d}/resp.csv -o {d}/run --taus 0.2,nan",
     ["--taus must be finite numbers", "nan"]),
    ("arena-simulate-players-huge", "arena simulate --players 1001 --games 10 --seeds 1",
     ["--players", "at most 1,000", "takes days"]),
    ("arena-simulate-seeds-huge", "arena simulate --players 3 --games 10 --seeds 1001",
     ["--seeds", "at most 1,000"]),
    ("arena-schedule-empty-new-player", "arena schedule {d}/battles.csv --add-player ''",
     ["--add-player", "empty"]),
    ("benchmark-report-not-a-page", "benchmark {d}/resp.csv -o {d}/run --report {d}/run/summary.csv",
     ["--report", "an .html path"]),
    ("simulate-empty-output", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o ''",
     ["'--output'", "an empty path"]),
    ("info-empty-path", "info ''", ["PATH is empty", "bundled name"]),
    ("score-empty-responses", "score '' --bank {d}/bank.csv", ["RESPONSES is empty"]),
    ("simulate-fixed-length-with-budget", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o "
     "{d}/sim --fixed-length 5 --budget 3 --cost-per-item 1", ["fixed-length test of 5", "drop --budget"]),
    ("info-theta-far-off", "info {d}/bank.csv --theta 0,1e9", ["--theta 1e+09", "[-10, 10]"]),
    ("simulate-thetas-semicolon", "simulate --bank {d}/bank.csv --thetas {d}/th_semi.csv -o {d}/sim",
     ["th_semi.csv", "delimited by ';'", "comma-separated"]),
    ("design-thetas-semicolon", "design --bank {d}/bank.csv -k 3 --thetas {d}/th_semi.csv",
     ["th_semi.csv", "delimited by ';'"]),
    ("evaluate-simulate-negative-seed", "evaluate --bank {d}/bank.csv --subject simulate:0.5:-1 "
     "--db {d}/r.sqlite --max-items 3", ["simulate:0.5:-1", "SEED must be a whole number >= 0"]),
    ("simulate-thetas-of-no-subject", "simulate {d}/resp.csv --bank {d}/bank.csv --thetas "
     "{d}/th.csv -o {d}/sim", ["--thetas", "none of RESPONSES' subjects"]),
]


@pytest.mark.parametrize("argv,needles", [pytest.param(a, n, id=i) for i, a, n in WALK_CASES])
def test_walk_case_is_one_line_exit_2(ws, capsys, monkeypatch, argv, needles):
    import shlex

    monkeypatch.chdir(ws)   # an empty path must never mean the current folder, but if it did
    _refused(shlex.split(argv.format(d=ws)), needles, capsys)


def test_more_walk_cases(ws, capsys):
    """design --random-forms beyond memory (a numpy MemoryError traceback), ranks --shift < 0
    (every model counted as moved)."""
    _refused(["design", "--bank", str(ws / "bank.csv"), "-k", "3", "--random-forms",
              str(10**11)], ["--random-forms", "between 1 and 10000"], capsys)
    _refused(["ranks", str(ws / "resp.csv"), "--bank", str(ws / "bank.csv"), "--shift", "-1"],
             ["--shift", ">= 0"], capsys)


def test_anova_drops_an_item_nobody_answered_with_a_warning(ws, capsys):
    """An all-missing item column: anova fitted parameters for it (counted in AIC/BIC, the
    likelihood-ratio df); it is dropped with a warning, as calibrate's library call does for a
    ResponseMatrix read with on_empty='keep'."""
    import atlascat as at
    from atlascat.responses import ResponseMatrix

    frame = pd.read_csv(ws / "resp.csv")
    frame["q3"] = np.nan
    frame.to_csv(ws / "gap.csv", index=False)
    assert main(["anova", str(ws / "gap.csv"), "--model", "1pl", "--model", "2pl", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "item(s) with no response: ['q3']" in err
    import json

    assert json.loads(out)[1]["df"] == 10          # 11 items: 2PL - 1PL = 10 parameters
    rm = ResponseMatrix.read(ws / "gap.csv", on_empty="keep")
    with pytest.warns(UserWarning, match="q3"):
        res = at.calibrate(rm, model="1pl")
    assert "q3" not in list(res.bank.item_ids)


def test_benchmark_replicates_beyond_any_use_are_refused():
    """--replicates 10**11 ran for hours (random forms scored one by one): the settings refuse
    it, before any calibration."""
    from atlascat.errors import ConfigError
    from atlascat.studies.config import BenchmarkConfig

    with pytest.raises(ConfigError, match="random_replicates must be at most 10000"):
        BenchmarkConfig(random_replicates=10**11)


def test_report_never_writes_its_page_over_a_file_of_the_run(tmp_path, capsys):
    """`atlas report RUN -o RUN/summary.csv` replaced the run's summary with the HTML page (the
    run could no longer be read); refused, the run's files as they were."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"name": "r", "config": {}}')
    (run / "summary.csv").write_text("method,theta_mae\nATLAS,0.1\n")
    _refused(["report", str(run), "-o", str(run / "summary.csv")],
             ["'summary.csv'", "would destroy the run", "report.html"], capsys)
    assert (run / "summary.csv").read_text() == "method,theta_mae\nATLAS,0.1\n"


def test_evaluate_bad_folders_are_refused_before_any_item_is_asked(ws, capsys):
    """--report-dir naming a file was found after the whole run (a vague 'cannot access ...:
    File exists'); --db below a file ended in the clean-up's own NotADirectoryError message.
    Both name the option now, before a run starts, and leave nothing behind."""
    (ws / "afile").write_text("x\n")
    subject = ["--bank", str(ws / "bank.csv"), "--subject", f"replay:{ws}/resp.csv#m1",
               "--max-items", "3"]
    _refused(["evaluate", *subject, "--db", str(ws / "r.sqlite"), "--report-dir",
              str(ws / "afile")], ["--report-dir", "is an existing file"], capsys)
    assert not (ws / "r.sqlite").exists()
    _refused(["evaluate", *subject, "-o", str(ws / "adir" / "run"), "--db",
              str(ws / "afile" / "r.sqlite")], ["--db", "is a file, not a directory"],
             capsys)
    assert not (ws / "adir" / "run").exists()


def _one_run(ws, capsys) -> str:
    assert main(["evaluate", "--bank", str(ws / "bank.csv"), "--subject",
                 f"replay:{ws}/resp.csv#m2", "--db", str(ws / "r.sqlite"), "--max-items", "3",
                 "-q"]) == 0
    capsys.readouterr()
    from atlascat.live.store import RunStore

    return RunStore(ws / "r.sqlite").list_runs()["run_id"].iloc[0]


def test_run_pages_and_stores_are_never_written_over_data(ws, capsys):
    """`atlas runs --run ID -o` naming the run database wrote the page over it (every run lost,
    then a traceback), naming a CSV replaced it; `atlas runs` / `compare-models` on an empty
    --db file made it a SQLite store. All refused, the files as they were."""
    rid = _one_run(ws, capsys)
    db, data = ws / "r.sqlite", ws / "resp.csv"
    before = data.read_bytes()
    _refused(["runs", "--db", str(db), "--run", rid, "-o", str(ws / "." / "r.sqlite")],
             ["is the --db file", "destroy that input"], capsys)
    _refused(["runs", "--db", str(db), "--run", rid, "-o", str(data)],
             ["'resp.csv'", "not an HTML page", "resp.html"], capsys)
    from atlascat.live.store import RunStore

    assert data.read_bytes() == before and RunStore(db).has_run(rid)   # the store intact
    (ws / "empty.csv").write_bytes(b"")
    _refused(["runs", "--db", str(ws / "empty.csv")], ["--db", "empty file"], capsys)
    _refused(["compare-models", rid, "x", "--db", str(ws / "empty.csv")], ["--db", "empty file"],
             capsys)
    assert (ws / "empty.csv").read_bytes() == b""
    assert main(["runs", "--db", str(db), "--run", rid, "-o", str(ws / "page.html")]) == 0


def test_resume_on_another_bank_or_twice_is_refused(ws, capsys):
    """--resume RUN --bank OTHER (another bank's parameters) was accepted for a finished run and
    its answers shown through the other bank's score link; the same run resumed twice ran
    twice. The bank the run started on, moved, still resumes."""
    rid = _one_run(ws, capsys)
    frame = pd.read_csv(ws / "bank.csv")
    frame.assign(a=frame["a"] * 1.5).to_csv(ws / "other.csv", index=False)
    db = ["--db", str(ws / "r.sqlite")]
    _refused(["evaluate", "--resume", rid, *db, "--bank", str(ws / "other.csv")],
             [f"run {rid} was started on a different bank", "other.csv", "drop --bank"], capsys)
    _refused(["evaluate", "--resume", rid, "--resume", rid, *db], ["more than once"], capsys)
    frame.to_csv(ws / "moved.csv", index=False)
    assert main(["evaluate", "--resume", rid, *db, "--bank", str(ws / "moved.csv"), "-q"]) == 0


def test_build_bank_never_replaces_files_of_a_folder_that_is_no_bank_folder(ws, capsys):
    """`build-bank RESULTS -o DATA_DIR` wrote its bank.parquet, link.json and manifest.json
    over the folder's own files (here the user's bank.parquet); refused before any work. A new
    folder, one with other files, and a bank folder rebuilt in place still build."""
    before = (ws / "bank.parquet").read_bytes()
    _refused(["build-bank", str(ws / "resp.csv"), "-o", str(ws)],
             ["no bank folder (no manifest.json)", "bank.parquet", "give a new folder"], capsys)
    assert (ws / "bank.parquet").read_bytes() == before and not (ws / "manifest.json").exists()
    (ws / "notes").mkdir()
    (ws / "notes" / "readme.txt").write_text("mine\n")
    for _ in range(2):   # the second time: the bank folder rebuilt in place
        assert main(["build-bank", str(ws / "resp.csv"), "-o", str(ws / "notes"), "-q"]) == 0
    assert (ws / "notes" / "readme.txt").read_text() == "mine\n"


def test_run_folders_never_replace_files_of_a_folder_that_is_no_run(ws, capsys):
    """`simulate ... -o DATA_DIR` wrote its summary.json over the folder's own; `benchmark
    RESPONSES -o DATA_DIR` wrote its bank.csv over the user's bank. Refused before any work
    (the library's BenchmarkRun.write too); an earlier run's folder is still rewritten."""
    (ws / "summary.json").write_text('{"mine": 1}\n')
    before = (ws / "bank.csv").read_bytes()
    _refused(["simulate", "--bank", str(ws / "bank.csv"), "--thetas", str(ws / "th.csv"), "-o",
              str(ws)], ["holds summary.json of its own", "person_scores.csv"], capsys)
    _refused(["benchmark", str(ws / "resp.csv"), "-o", str(ws)],
             ["bank.csv", "no run.json"], capsys)
    assert (ws / "summary.json").read_text() == '{"mine": 1}\n'
    assert (ws / "bank.csv").read_bytes() == before
    sim = ["simulate", "--bank", str(ws / "bank.csv"), "--thetas", str(ws / "th.csv"), "-o",
           str(ws / "sim"), "-q"]
    assert main(sim) == 0 and main(sim) == 0     # an earlier run's folder: rewritten


def test_benchmark_run_write_refuses_a_folder_with_a_bank_of_its_own(ws, tmp_path):
    from atlascat.errors import ConfigError
    from atlascat.studies.protocol import BenchmarkRun

    run = BenchmarkRun.__new__(BenchmarkRun)   # the check comes before any attribute is read
    with pytest.raises(ConfigError, match="holds bank.csv of its own"):
        run.write(ws)


def test_evaluate_output_never_replaces_a_results_json_of_another_kind(ws, capsys):
    """`evaluate -o DIR` whose results.json is someone else's (a harness's {"results": ...})
    replaced it with its run rows; refused before asking. An earlier evaluate's is extended."""
    out = ws / "ev"
    out.mkdir()
    (out / "results.json").write_text('{"results": {"arc": 0.5}}\n')
    args = ["--bank", str(ws / "bank.csv"), "--max-items", "3", "-o", str(out), "-q"]
    _refused(["evaluate", "--subject", f"replay:{ws}/resp.csv#m3", *args],
             ["results.json", "no atlas evaluate run's", "give a new folder"], capsys)
    assert (out / "results.json").read_text() == '{"results": {"arc": 0.5}}\n'
    (out / "results.json").unlink()
    for model in ("m3", "m4"):
        assert main(["evaluate", "--subject", f"replay:{ws}/resp.csv#{model}", *args]) == 0
    import json

    assert len(json.loads((out / "results.json").read_text())) == 2


def test_a_trailing_delimiter_is_named_as_such(ws, capsys):
    """A comma at the end of every line gives pandas an empty column 'Unnamed: 13': the
    message said only "item(s) with no response: ['Unnamed: 13']"; it names the cause now."""
    lines = (ws / "resp.csv").read_text().strip().split("\n")
    (ws / "trailing.csv").write_text("\n".join(line + "," for line in lines) + "\n")
    _refused(["calibrate", str(ws / "trailing.csv"), "-o", str(ws / "b.csv")],
             ["'Unnamed: 13'", "a delimiter at the end of every line", "--drop-empty"], capsys)


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs Linux /proc")
def test_an_unwritable_place_is_found_before_any_work(ws, capsys):
    """A folder access() calls writable but that takes no file (/proc; a read-only mount, an
    ACL): benchmark failed only after its whole run, calibrate after the fit. A probe finds it
    first, for every output file, folder and --db."""
    for argv in (["benchmark", str(ws / "resp.csv"), "-o", "/proc/atlas_run"],
                 ["calibrate", str(ws / "resp.csv"), "-o", "/proc/atlas_bank.csv"],
                 ["evaluate", "--bank", str(ws / "bank.csv"), "--subject",
                  f"replay:{ws}/resp.csv#m1", "--db", "/proc/atlas.sqlite"]):
        _refused(argv, ["cannot be written in '/proc'", "choose a writable location"], capsys)
