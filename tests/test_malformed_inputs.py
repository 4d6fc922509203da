"""Catalogue of malformed inputs: every command and the public Python API.

Each CLI case must end with exit code 2 and ONE line on stderr (``error: ...``) that names the
culprit (file, row, column, item id or option); each API case must raise the documented
:class:`~atlascat.errors.AtlasError` subclass with a one-line message naming the culprit. No case
may print a traceback, a bare ``Aborted.``, or succeed with a NaN / infinite / "converged" lie.

The workspace below holds one small valid bank, matrix and theta file and every broken variant.
"""
from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest

import atlascat as at
from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.catalogue.links import score_link_path
from atlascat.cli import main
from atlascat.errors import AtlasError, BankError, ConfigError, ResponseDataError
from atlascat.irt import fit as irt_fit
from atlascat.irt.ability import eap, estimate_ability, wle
from atlascat.irt.bank import ItemBank
from atlascat.irt.linking import link_banks
from atlascat.irt.polybank import PolyBank
from atlascat.responses import ResponseMatrix

N_ITEMS, N_SUBJECTS = 12, 80
IDS = [f"q{j}" for j in range(N_ITEMS)]


def _bank() -> ItemBank:
    rng = np.random.default_rng(5)
    return ItemBank(IDS, rng.uniform(0.8, 2.0, N_ITEMS), np.linspace(-1.5, 1.5, N_ITEMS))


def _responses(n=N_SUBJECTS) -> pd.DataFrame:
    rng = np.random.default_rng(6)
    theta = rng.normal(size=n)
    p = _bank().probability(theta)
    y = (rng.random(p.shape) < p).astype(int)
    df = pd.DataFrame(y, columns=IDS)
    df.insert(0, "model", [f"m{i}" for i in range(n)])
    return df


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    d = tmp_path_factory.mktemp("malformed")
    bank = _bank()
    bank.write(d / "bank.csv")
    resp = _responses()
    resp.to_csv(d / "resp.csv", index=False)
    resp.head(1).to_csv(d / "resp1.csv", index=False)
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [0.5, -1.0]}).to_csv(d / "th.csv", index=False)
    # ---- broken files
    (d / "adir").mkdir()
    (d / "afile").write_text("not a directory\n")
    (d / "empty.csv").write_bytes(b"")
    (d / "header_only.csv").write_text("model," + ",".join(IDS) + "\n")
    (d / "nonutf8_bank.csv").write_bytes(b"item_id,a,b\nq\xff1,1.0,0.0\nq2,1.2,0.5\n")
    raw = resp.to_csv(index=False).encode()
    (d / "nonutf8_resp.csv").write_bytes(raw.replace(b"m3,", b"m\xe93,", 1))
    (d / "corrupt.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 4)
    gz = gzip.compress(raw * 20)
    (d / "trunc.csv.gz").write_bytes(gz[: len(gz) // 2])
    (d / "semicolon.csv").write_text(resp.to_csv(index=False, sep=";"))
    (d / "resp.xlsx").write_bytes(b"PK\x03\x04")
    (d / "dupbank.csv").write_text("item_id,a,b\nq1,1,0\nq2,1,1\nq1,1,2\n")
    (d / "dupcol_bank.csv").write_text("item_id,a,b,a\nq0,1,0,2\nq1,1,1,2\n")
    (d / "nul_bank.csv").write_text("item_id,a,b\nq\x000,1,0\nq1,1,1\n")
    (d / "nul_header.csv").write_text("model,q0,\x00q1\nm0,1,0\nm1,0,1\n")
    (d / "dupcol_bank_quoted.csv").write_text('item_id,a,b,a\nq0,"1.0",0,2\nq1,1,1,2\n')
    ext = bank.to_frame()
    ext.loc[3, ["a", "b"]] = [1e6, 1e6]
    ext.to_csv(d / "bank_extreme.csv", index=False)
    huge = bank.to_frame()
    huge.loc[2, "a"] = 1e308
    huge.to_csv(d / "bank_huge_a.csv", index=False)
    cu = bank.to_frame()
    cu.loc[4, ["c", "u"]] = [0.6, 0.5]
    cu.to_csv(d / "bank_c_ge_u.csv", index=False)
    txt = bank.to_frame().astype({"b": object})
    txt.loc[5, "b"] = "hard"
    txt.to_csv(d / "bank_text.csv", index=False)
    zero = bank.to_frame()
    zero["a"] = 0.0
    zero.to_csv(d / "bank_zero_a.csv", index=False)
    other = bank.to_frame()
    other["item_id"] = [f"z{j}" for j in range(N_ITEMS)]
    other.to_csv(d / "bank_disjoint.csv", index=False)
    bad = resp.astype(object)
    bad.loc[4, "q2"] = "yes"
    bad.to_csv(d / "resp_text.csv", index=False)
    two = resp.copy()
    two.loc[7, "q5"] = 2
    two.to_csv(d / "resp_value2.csv", index=False)
    dups = resp.copy()
    dups.loc[9, "model"] = "m0"
    dups.to_csv(d / "resp_dupsubject.csv", index=False)
    (d / "resp_duphead.csv").write_text("model,q1,q2,q1\nm0,1,0,1\nm1,0,1,0\n")
    miss = resp.astype(object)
    miss.loc[11, IDS] = np.nan
    miss.to_csv(d / "resp_allmissing_row.csv", index=False)
    oth = resp.copy()
    oth.columns = ["model"] + [f"z{j}" for j in range(N_ITEMS)]
    oth.to_csv(d / "resp_other_items.csv", index=False)
    resp[["model", "q0"]].to_csv(d / "one_item.csv", index=False)
    resp[["model"]].to_csv(d / "ids_only.csv", index=False)
    resp.astype(object).assign(q4=["inf"] + [0] * (len(resp) - 1)).to_csv(d / "resp_inf.csv", index=False)
    resp.assign(q4=[1e308] + [0] * (len(resp) - 1)).to_csv(d / "resp_1e308.csv", index=False)
    (d / "th_empty.csv").write_bytes(b"")
    (d / "th_nonutf8.csv").write_bytes(b"subject_id,theta\n\xff\xfeabc,0.5\n")
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [1e6, 0.5]}).to_csv(d / "th_huge.csv", index=False)
    pd.DataFrame({"subject_id": ["a", "b"], "theta": ["high", 0.5]}).to_csv(d / "th_text.csv", index=False)
    pd.DataFrame({"subject_id": ["a"], "ability": [0.1]}).to_csv(d / "th_notheta.csv", index=False)
    (d / "anchors_nonutf8.txt").write_bytes(b"q1\nq\xff2\n")
    pd.DataFrame({"subject_id": ["a", "b"], "acc": [0.1, 0.2]}).to_csv(d / "scores_bad.csv", index=False)
    # ---- build-bank: sample logs (21 models x 3 items of task t1; one t2 file; a model that
    # lacks an item), a matrix of 10 models, a scores file naming an unknown model
    for m in range(21):
        _log(d / "logs" / f"m{m:02d}" / "samples_t1_2025-01-01T00-00-00.0.jsonl", 3, m)
        _log(d / "logs_ragged" / f"m{m:02d}" / "samples_t1_2025-01-01T00-00-00.0.jsonl",
             2 if m == 4 else 3, m)
    _log(d / "logs" / "m00" / "samples_t2_2025-01-01T00-00-00.0.jsonl", 3, 0)
    resp.head(10).to_csv(d / "resp10.csv", index=False)
    pd.DataFrame({"model": ["m1", "zz"], "score": [0.5, 0.6]}).to_csv(d / "scores_unknown.csv",
                                                                      index=False)
    # an error rate given as the score; one score for every model
    pd.DataFrame({"model": resp["model"], "score": 1 - resp[IDS].mean(axis=1)}).to_csv(
        d / "scores_falling.csv", index=False)
    pd.DataFrame({"model": resp["model"], "score": 0.5}).to_csv(d / "scores_same.csv",
                                                                index=False)
    pd.DataFrame({"name": resp["model"], "value": 0.5}).to_csv(d / "scores_name_value.csv",
                                                               index=False)
    pd.DataFrame({"score": [0.5, 0.6]}).to_csv(d / "scores_no_model.csv", index=False)
    # ordinal ratings (--model graded|gpcm): levels 1 and 4; a half point; one level only
    rat = resp.copy()
    rat[IDS] = (rat[IDS] * 3 + 1).astype(float)
    rat.to_csv(d / "rat.csv", index=False)
    rat.assign(q3=rat["q3"].where(rat.index != 2, 2.5)).to_csv(d / "rat_half.csv", index=False)
    rat.assign(q5=3.0).to_csv(d / "rat_one.csv", index=False)
    PolyBank(IDS, np.column_stack([np.ones(N_ITEMS), np.linspace(1, -1, N_ITEMS)]),
             "graded").write(d / "graded.csv")
    # ratings scored on that bank (levels 0;1): a rating of 2 is a category it never observed
    unseen = resp.copy()
    unseen.loc[2, "q3"] = 2
    unseen.to_csv(d / "rat_unseen.csv", index=False)
    # sample logs whose scores contradict their outputs (every model picks option a, half
    # are scored right: no gold fits both; the target is no option's index), and a
    # corpus-level metric (a (reference, prediction) pair per sample)
    for m in range(21):
        name = f"m{m:02d}/samples_t1_2025-01-01T00-00-00.0.jsonl"
        _log(d / "logs_contradict" / name, 6, m, target="an answer")
        _log(d / "logs_corpus" / name, 3, m, metric="bleu", value=["the ref", "the pred"])
    # bank folders (a good one's files: our bank, the bundled arc score link) with one file broken
    good = {"manifest.json": json.dumps({"format": "atlas-bank-folder", "version": 1,
                                         "benchmark": "t", "source": {"metric": "acc"}}),
            "link.json": score_link_path("arc").read_text(), "requests.jsonl": '{"item_id": "q0"}\n'}
    for name, broken in (("empty_link", {"link.json": ""}), ("list_link", {"link.json": "[1, 2]"}),
                         ("null_manifest", {"manifest.json": "null"}),
                         ("int_metric", {"manifest.json": '{"source": {"metric": 5}}'}),
                         ("broken_requests", {"requests.jsonl": '{"item_id": "q0"}\n{"item_id": "q\n'})):
        folder = d / f"bd_{name}"
        folder.mkdir()
        bank.to_frame().to_parquet(folder / "bank.parquet")
        for fname, text in {**good, **broken}.items():
            (folder / fname).write_text(text)
    # benchmark run folders with one file broken (the readers' checks come before any use)
    run_files = {"run.json": '{"name": "r", "config": {}}', "summary.csv": "method,theta_mae\nATLAS,0.1\n",
                 "persons.csv.gz": "method,subject_id,theta,se,n_items\nATLAS,m0,0.1,0.3,5\n"}
    for name, broken in (("null_json", {"run.json": "null"}), ("empty_summary", {"summary.csv": ""}),
                         ("bad_reference", {"reference.csv": "x\n1\n2\n"})):
        folder = d / f"run_{name}"
        folder.mkdir()
        bank.write(folder / "bank.csv")
        for fname, text in {**run_files, **broken}.items():
            (folder / fname).write_bytes(gzip.compress(text.encode()) if fname.endswith(".gz")
                                         else text.encode())
    (d / "battles.csv").write_text("model_a,model_b,winner\nx,y,model_a\ny,z,tie\nz,x,model_b\n")
    # score --groups: a groups file short of subjects, one with a group the fit did not have
    ids = resp["model"].astype(str)
    pd.DataFrame({"subject_id": ids[:5], "group": "A"}).to_csv(d / "groups_partial.csv", index=False)
    pd.DataFrame({"subject_id": ids, "group": ["C"] + ["A"] * (len(ids) - 1)}).to_csv(
        d / "groups_unknown.csv", index=False)
    (d / "groups_summary.json").write_text(json.dumps({"groups": {"reference": "A", "groups": [
        {"group": "A", "mean": 0.0, "sd": 1.0}, {"group": "B", "mean": 0.5, "sd": 1.2}]}}))
    return d


def _log(path, n_items, m, *, target=0, metric="acc", value=None):
    """A tiny lm-eval 0.4-style sample log: n_items two-choice items, metric acc (alternating
    0/1 scores, option a picked), or ``metric`` logging ``value`` per sample."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"doc_id": i, "doc": {"q": i}, "target": target,
                         "arguments": {"gen_args_0": {"arg_0": f"Q{i}:", "arg_1": " a"},
                                       "gen_args_1": {"arg_0": f"Q{i}:", "arg_1": " b"}},
                         "resps": [[[-1.0, False]], [[-2.0, False]]],
                         "filtered_resps": [[-1.0, False], [-2.0, False]],
                         "filter": "none", "metrics": [metric],
                         metric: float((i + m) % 2) if value is None else value})
             for i in range(n_items)]
    path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------ CLI cases
# (id, argv with {d} = workspace, strings the one-line message must contain)
CLI_CASES = [
    # calibrate
    ("calibrate-nonutf8", "calibrate {d}/nonutf8_resp.csv -o {d}/o/b.csv", ["nonutf8_resp.csv", "UTF-8"]),
    ("calibrate-truncated-gz", "calibrate {d}/trunc.csv.gz -o {d}/o/b.csv", ["trunc.csv.gz", "gzip"]),
    ("calibrate-corrupt-parquet", "calibrate {d}/corrupt.parquet -o {d}/o/b.csv", ["corrupt.parquet", "Parquet"]),
    ("calibrate-dir-as-responses", "calibrate {d}/adir -o {d}/o/b.csv", ["adir", "directory"]),
    ("calibrate-dir-as-output", "calibrate {d}/resp.csv -o {d}/adir", ["adir", "directory"]),
    ("calibrate-output-under-file", "calibrate {d}/resp.csv -o {d}/afile/b.csv", ["afile", "not a directory"]),
    ("calibrate-semicolon", "calibrate {d}/semicolon.csv -o {d}/o/b.csv", ["semicolon.csv", "';'"]),
    ("calibrate-empty-file", "calibrate {d}/empty.csv -o {d}/o/b.csv", ["empty.csv", "empty"]),
    ("calibrate-header-only", "calibrate {d}/header_only.csv -o {d}/o/b.csv", ["header_only.csv", "no subject rows"]),
    ("calibrate-one-item", "calibrate {d}/one_item.csv -o {d}/o/b.csv --no-filter", ["1 item", "add items"]),
    ("calibrate-one-subject", "calibrate {d}/resp1.csv -o {d}/o/b.csv --no-filter", ["subject"]),
    ("calibrate-text-cell", "calibrate {d}/resp_text.csv -o {d}/o/b.csv", ["'yes'", "q2"]),
    ("calibrate-value-2", "calibrate {d}/resp_value2.csv -o {d}/o/b.csv", ["outside [0, 1]", "q5"]),
    ("calibrate-dup-subject", "calibrate {d}/resp_dupsubject.csv -o {d}/o/b.csv", ["duplicate subject id", "'m0'"]),
    ("calibrate-dup-item", "calibrate {d}/resp_duphead.csv -o {d}/o/b.csv", ["duplicate item id", "'q1'"]),
    ("calibrate-all-missing-row", "calibrate {d}/resp_allmissing_row.csv -o {d}/o/b.csv", ["m11", "--drop-empty"]),
    ("calibrate-missing-file", "calibrate {d}/nosuch.csv -o {d}/o/b.csv", ["nosuch.csv", "does not exist"]),
    ("calibrate-unsupported-type", "calibrate {d}/resp.xlsx -o {d}/o/b.csv", ["resp.xlsx", ".csv"]),
    ("calibrate-bad-model", "calibrate {d}/resp.csv -o {d}/o/b.csv --model 5pl", ["5pl"]),
    ("calibrate-bad-prior", "calibrate {d}/resp.csv -o {d}/o/b.csv --prior-c beta(x)", ["beta(x)"]),
    ("calibrate-bad-quadpts", "calibrate {d}/resp.csv -o {d}/o/b.csv --quadpts 2", ["quadpts"]),
    ("calibrate-bad-tol", "calibrate {d}/resp.csv -o {d}/o/b.csv --tol 0", ["tol"]),
    ("calibrate-bad-format", "calibrate {d}/resp.csv -o {d}/o/b.csv --format xml", ["--format", "xml"]),
    ("calibrate-summary-dir", "calibrate {d}/resp.csv -o {d}/o/b.csv --summary {d}/adir", ["--summary", "directory"]),
    ("calibrate-unknown-bundled", "calibrate arcc -o {d}/o/b.csv", ["arcc", "bundled"]),
    ("calibrate-se-partitioned", "calibrate {d}/resp.csv -o {d}/o/b.csv --se --partition-size 5",
     ["--se", "joint calibration"]),
    ("anova-one-model", "anova {d}/resp.csv --model 2pl", ["two or more different --model"]),
    ("anova-same-size-models", "anova {d}/resp.csv --model rasch --model 1pl",
     ["same number of parameters"]),
    # fit
    ("fit-bank-nonutf8", "fit {d}/resp.csv --bank {d}/nonutf8_bank.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("fit-bank-extreme", "fit {d}/resp.csv --bank {d}/bank_extreme.csv", ["q3", "1e+06"]),
    ("fit-one-subject", "fit {d}/resp1.csv --bank {d}/bank.csv", ["at least 2 subjects"]),
    ("fit-bank-dir", "fit {d}/resp.csv --bank {d}/adir", ["adir", "directory"]),
    ("fit-bank-corrupt-parquet", "fit {d}/resp.csv --bank {d}/corrupt.parquet", ["corrupt.parquet", "Parquet"]),
    ("fit-bank-unknown", "fit {d}/resp.csv --bank nope", ["nope", "bundled bank"]),
    ("fit-truncated-gz", "fit {d}/trunc.csv.gz --bank {d}/bank.csv", ["trunc.csv.gz", "gzip"]),
    ("fit-output-dir", "fit {d}/resp.csv --bank {d}/bank.csv -o {d}/adir", ["adir", "directory"]),
    ("fit-bad-estimated", "fit {d}/resp.csv --bank {d}/bank.csv --estimated 7pl", ["--estimated", "7pl"]),
    ("fit-dup-bank-id", "fit {d}/resp.csv --bank {d}/dupbank.csv", ["'q1'", "rows [0, 2]"]),
    ("fit-no-common-items", "fit {d}/resp_other_items.csv --bank {d}/bank.csv", ["none of the", "z0"]),
    ("fit-bad-extra-items", "fit {d}/resp.csv --bank {d}/bank.csv --extra-items maybe", ["--extra-items"]),
    # score
    ("score-bank-nonutf8", "score {d}/resp.csv --bank {d}/nonutf8_bank.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("score-bank-huge-a", "score {d}/resp.csv --bank {d}/bank_huge_a.csv", ["q2", "'a'"]),
    ("score-prior-mean-nan", "score {d}/resp.csv --bank {d}/bank.csv --prior-mean nan", ["--prior-mean"]),
    ("score-prior-sd-zero", "score {d}/resp.csv --bank {d}/bank.csv --prior-sd 0", ["--prior-sd"]),
    ("score-bad-method", "score {d}/resp.csv --bank {d}/bank.csv --method xyz", ["--method", "xyz"]),
    ("score-output-dir", "score {d}/resp.csv --bank {d}/bank.csv -o {d}/adir", ["adir", "directory"]),
    ("score-output-under-file", "score {d}/resp.csv --bank {d}/bank.csv -o {d}/afile/s.csv", ["afile"]),
    ("score-truncated-gz", "score {d}/trunc.csv.gz --bank {d}/bank.csv", ["trunc.csv.gz", "gzip"]),
    ("score-c-ge-u", "score {d}/resp.csv --bank {d}/bank_c_ge_u.csv", ["q4", "c < u"]),
    ("score-text-param", "score {d}/resp.csv --bank {d}/bank_text.csv", ["'hard'", "q5"]),
    ("score-bad-reconstruct", "score {d}/resp.csv --bank {d}/bank.csv --reconstruct foo", ["--reconstruct"]),
    ("score-lambda-out-of-range", "score {d}/resp.csv --bank {d}/bank.csv --reconstruct gpirt --lambda 2", ["--lambda"]),
    ("score-bad-extra-items", "score {d}/resp.csv --bank {d}/bank.csv --extra-items maybe", ["--extra-items"]),
    ("score-no-common-items", "score {d}/resp_other_items.csv --bank {d}/bank.csv", ["none of the"]),
    ("score-semicolon", "score {d}/semicolon.csv --bank {d}/bank.csv", ["semicolon.csv", "';'"]),
    ("score-dir-responses", "score {d}/adir --bank {d}/bank.csv", ["adir", "directory"]),
    ("score-groups-missing-subject", "score {d}/resp.csv --bank {d}/bank.csv --groups {d}/groups_partial.csv --summary {d}/groups_summary.json", ["have no group", "'m5'"]),
    ("score-groups-unknown-label", "score {d}/resp.csv --bank {d}/bank.csv --groups {d}/groups_unknown.csv --summary {d}/groups_summary.json", ["'m0'", "group 'C'", "not one of the fit's groups"]),
    # items
    ("items-bank-nonutf8", "items --bank {d}/nonutf8_bank.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("items-responses-nonutf8", "items --bank {d}/bank.csv {d}/nonutf8_resp.csv", ["nonutf8_resp.csv", "UTF-8"]),
    ("items-no-bank", "items", ["--bank"]),
    ("items-output-dir", "items --bank {d}/bank.csv -o {d}/adir", ["adir", "directory"]),
    ("items-bank-extreme", "items --bank {d}/bank_extreme.csv", ["q3"]),
    # info
    ("info-nonutf8", "info {d}/nonutf8_bank.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("info-truncated-gz", "info {d}/trunc.csv.gz", ["trunc.csv.gz", "gzip"]),
    ("info-corrupt-parquet", "info {d}/corrupt.parquet", ["corrupt.parquet", "Parquet"]),
    ("info-dir", "info {d}/adir", ["adir", "directory"]),
    ("info-empty", "info {d}/empty.csv", ["empty.csv", "empty"]),
    ("info-dup-bank", "info {d}/dupbank.csv", ["'q1'", "rows [0, 2]"]),
    ("info-semicolon", "info {d}/semicolon.csv", ["semicolon.csv", "';'"]),
    ("info-missing", "info {d}/nosuch.csv", ["nosuch.csv"]),
    ("info-ids-only", "info {d}/ids_only.csv", ["0 item columns"]),
    ("info-inf-cell", "info {d}/resp_inf.csv", ["inf", "'q4'", "row 0"]),
    ("info-1e308-cell", "info {d}/resp_1e308.csv", ["1e+308", "'q4'"]),
    # simulate
    ("simulate-bank-nonutf8", "simulate --bank {d}/nonutf8_bank.csv --thetas {d}/th.csv -o {d}/sim", ["nonutf8_bank.csv", "UTF-8"]),
    ("simulate-thetas-empty", "simulate --bank {d}/bank.csv --thetas {d}/th_empty.csv -o {d}/sim", ["th_empty.csv", "empty"]),
    ("simulate-thetas-nonutf8", "simulate --bank {d}/bank.csv --thetas {d}/th_nonutf8.csv -o {d}/sim", ["th_nonutf8.csv", "UTF-8"]),
    ("simulate-thetas-huge", "simulate --bank {d}/bank.csv --thetas {d}/th_huge.csv -o {d}/sim", ["th_huge.csv", "1e+06", "row 2"]),
    ("simulate-thetas-text", "simulate --bank {d}/bank.csv --thetas {d}/th_text.csv -o {d}/sim", ["th_text.csv", "'high'"]),
    ("simulate-thetas-dir", "simulate --bank {d}/bank.csv --thetas {d}/adir -o {d}/sim", ["adir", "directory"]),
    ("simulate-output-is-file", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o {d}/afile", ["afile", "existing file"]),
    ("simulate-no-input", "simulate --bank {d}/bank.csv -o {d}/sim", ["RESPONSES", "--thetas"]),
    ("simulate-no-output", "simulate --bank {d}/bank.csv --thetas {d}/th.csv", ["-o/--output"]),
    ("simulate-no-theta-column", "simulate --bank {d}/bank.csv --thetas {d}/th_notheta.csv -o {d}/sim", ["th_notheta.csv", "theta column"]),
    ("simulate-truncated-gz", "simulate {d}/trunc.csv.gz --bank {d}/bank.csv -o {d}/sim", ["trunc.csv.gz", "gzip"]),
    ("simulate-bad-selection", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o {d}/sim --selection foo", ["foo"]),
    ("simulate-theta0-nan", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o {d}/sim --theta0 nan", ["--theta0"]),
    ("simulate-bank-extreme", "simulate --bank {d}/bank_extreme.csv --thetas {d}/th.csv -o {d}/sim", ["q3"]),
    ("simulate-max-items-zero", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o {d}/sim --max-items 0", ["--max-items must be >= 1"]),
    # link
    ("link-nonutf8", "link {d}/nonutf8_bank.csv {d}/bank.csv -o {d}/l.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("link-zero-a", "link {d}/bank.csv {d}/bank_zero_a.csv -o {d}/l.csv", ["a > 0", "not identified"]),
    ("link-disjoint", "link {d}/bank.csv {d}/bank_disjoint.csv -o {d}/l.csv", ["share 0"]),
    ("link-output-dir", "link {d}/bank.csv {d}/bank.csv -o {d}/adir", ["adir", "directory"]),
    ("link-bad-method", "link {d}/bank.csv {d}/bank.csv -o {d}/l.csv --method foo", ["foo"]),
    ("link-anchors-nonutf8", "link {d}/bank.csv {d}/bank.csv -o {d}/l.csv --anchors {d}/anchors_nonutf8.txt", ["anchors_nonutf8.txt", "UTF-8"]),
    ("link-anchors-dir", "link {d}/bank.csv {d}/bank.csv -o {d}/l.csv --anchors {d}/adir", ["adir", "directory"]),
    ("link-bad-format", "link {d}/bank.csv {d}/bank.csv -o {d}/l.csv --format xml", ["--format"]),
    ("link-ref-missing", "link {d}/nosuch.csv {d}/bank.csv -o {d}/l.csv", ["REF", "nosuch.csv"]),
    # benchmark
    ("benchmark-truncated-gz", "benchmark {d}/trunc.csv.gz -o {d}/run", ["trunc.csv.gz", "gzip"]),
    ("benchmark-no-output", "benchmark {d}/resp.csv", ["-o/--output"]),
    ("benchmark-output-is-file", "benchmark {d}/resp.csv -o {d}/afile", ["afile", "existing file"]),
    ("benchmark-all-missing-row", "benchmark {d}/resp_allmissing_row.csv -o {d}/run", ["m11", "--drop-empty"]),
    ("benchmark-bad-taus", "benchmark {d}/resp.csv -o {d}/run --taus a,b", ["--taus"]),
    ("benchmark-bad-test-size", "benchmark {d}/resp.csv -o {d}/run --test-size 2", ["--test-size"]),
    ("benchmark-nonutf8", "benchmark {d}/nonutf8_resp.csv -o {d}/run", ["nonutf8_resp.csv", "UTF-8"]),
    # design
    ("design-bank-nonutf8", "design --bank {d}/nonutf8_bank.csv -k 3", ["nonutf8_bank.csv", "UTF-8"]),
    ("design-thetas-nonutf8", "design --bank {d}/bank.csv -k 3 --thetas {d}/th_nonutf8.csv", ["th_nonutf8.csv", "UTF-8"]),
    ("design-output-dir", "design --bank {d}/bank.csv -k 3 -o {d}/adir", ["adir", "directory"]),
    ("design-bank-dir", "design --bank {d}/adir -k 3", ["adir", "directory"]),
    # ranks
    ("ranks-nonutf8", "ranks {d}/nonutf8_bank.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("ranks-no-theta", "ranks {d}/scores_bad.csv", ["scores_bad.csv", "theta"]),
    ("ranks-bank-nonutf8", "ranks {d}/resp.csv --bank {d}/nonutf8_bank.csv", ["nonutf8_bank.csv", "UTF-8"]),
    ("ranks-plots-is-file", "ranks {d}/resp.csv --bank {d}/bank.csv --plots {d}/afile", ["--plots", "existing file"]),
    # compare / report / arena
    ("compare-not-a-run", "compare {d}/adir", ["adir"]),
    ("report-output-under-file", "report {d}/adir -o {d}/afile/r.html", ["afile", "not a directory"]),
    ("arena-fit-dir", "arena fit {d}/adir", ["adir", "directory"]),
    ("arena-fit-missing", "arena fit {d}/nosuch.csv", ["nosuch.csv", "does not exist"]),
    ("arena-fit-unknown-name", "arena fit arena-dem", ["arena-dem", "does not exist"]),
    ("compare-models-no-store", "compare-models 0123456789ab ba9876543210", ["does not exist", "no run was written elsewhere", "--db"]),
    # evaluate / runs (live-runner's commands, through the same error path)
    ("evaluate-bank-nonutf8", "evaluate --bank {d}/nonutf8_bank.csv --subject simulate:0.5 --db {d}/r.sqlite", ["nonutf8_bank.csv", "UTF-8"]),
    ("evaluate-bank-dir", "evaluate --bank {d}/adir --subject simulate:0.5 --db {d}/r.sqlite", ["adir", "directory"]),
    ("evaluate-bank-corrupt", "evaluate --bank {d}/corrupt.parquet --subject simulate:0.5 --db {d}/r.sqlite", ["corrupt.parquet", "Parquet"]),
    ("evaluate-bank-unknown", "evaluate --bank nope --subject simulate:0.5 --db {d}/r.sqlite", ["'nope'", "bundled"]),
    ("evaluate-subject-text-no-emoji", "evaluate --bank arc --subject simulate:abc --db {d}/r.sqlite", ["simulate:abc:"]),
    ("evaluate-subject-nan", "evaluate --bank arc --subject simulate:nan --db {d}/r.sqlite", ["simulate:nan"]),
    ("evaluate-subject-kind", "evaluate --bank arc --subject nope:x --db {d}/r.sqlite", ["'nope:x'"]),
    ("evaluate-db-dir", "evaluate --bank arc --subject simulate:0.5 --db {d}/adir", ["adir", "directory"]),
    ("evaluate-se-stop-nan", "evaluate --bank arc --subject simulate:0.5 --db {d}/r.sqlite --se-stop nan", ["--se-stop"]),
    ("evaluate-old-model-flag", "evaluate --bank arc --subject simulate:0.5 --db {d}/r.sqlite --model meta-llama/Llama-3-8B", ["has no --model", "did you mean --llm meta-llama/Llama-3-8B?"]),
    ("evaluate-resume-max-items", "evaluate --resume abc --db {d}/r.sqlite --max-items 20", ["--resume", "drop --max-items"]),
    ("evaluate-resume-seed", "evaluate --resume abc --db {d}/r.sqlite --seed 3", ["--resume", "drop --seed"]),
    ("evaluate-token-budget-no-usage", "evaluate --bank arc --subject simulate:0.5 --db {d}/r.sqlite --token-budget 1000", ["does not report the tokens it uses", "completions:"]),
    ("evaluate-token-budget-zero", "evaluate --bank arc --subject simulate:0.5 --db {d}/r.sqlite --token-budget 0", ["token budget", ">= 1"]),
    ("evaluate-model-flag-irt-name", "evaluate --bank arc --subject simulate:0.5 --db {d}/r.sqlite --model 3pl", ["has no --model", "the bank's", "--llm"]),
    ("runs-missing-db", "runs --db {d}/nosuch.sqlite", ["nosuch.sqlite"]),
    ("runs-db-not-sqlite", "runs --db {d}/afile", ["afile"]),
    ("runs-db-dir", "runs --db {d}/adir", ["adir", "directory"]),
    # build-bank (issue 27)
    ("build-bank-tasks-mixed", "build-bank {d}/logs -o {d}/bb", ["different tasks mixed", "t1, t2", "--task"]),
    ("build-bank-metric-absent", "build-bank {d}/logs --task t1 --metric acc_norm -o {d}/bb", ["'acc_norm'", "is missing from", "acc"]),
    ("build-bank-item-sets-differ", "build-bank {d}/logs_ragged -o {d}/bb", ["logged different items", "'m04' 2", "--common-items"]),
    ("build-bank-scores-unknown", "build-bank {d}/resp.csv --scores {d}/scores_unknown.csv -o {d}/bb", ["--scores", "'zz'", "not in the results"]),
    ("build-bank-scores-falling", "build-bank {d}/resp.csv --scores {d}/scores_falling.csv -o {d}/bb", ["--scores", "do not rise", "correlation -1.00", "error rate"]),
    ("build-bank-scores-same", "build-bank {d}/resp.csv --scores {d}/scores_same.csv -o {d}/bb", ["--scores", "same score"]),
    ("build-bank-scores-name-value", "build-bank {d}/resp.csv --scores {d}/scores_name_value.csv -o {d}/bb", ["--scores", "columns name, value", "'score' column", "model,score"]),
    ("build-bank-scores-no-model", "build-bank {d}/resp.csv --scores {d}/scores_no_model.csv -o {d}/bb", ["--scores", "model column"]),
    ("build-bank-too-few-models", "build-bank {d}/resp10.csv -o {d}/bb", ["10 model(s)", "at least 20"]),
    ("build-bank-metric-on-matrix", "build-bank {d}/resp.csv --metric acc -o {d}/bb", ["--metric", "response matrix"]),
    ("build-bank-output-is-file", "build-bank {d}/resp.csv -o {d}/afile", ["afile", "existing file"]),
    # your benchmark, your metric (issue 43): one line each
    ("build-bank-score-outside-range", "build-bank {d}/resp.csv --score-range 2 10 -o {d}/bb", ["outside the declared range [2, 10]", "model 'm0'", "item 'q", "--score-range"]),
    ("build-bank-corpus-metric", "build-bank {d}/logs_corpus --metric bleu -o {d}/bb", ["'bleu'", "whole corpus", "not a mean over items", "--metric"]),
    ("build-bank-ordinal-model", "build-bank {d}/rat.csv --score-range 1 4 --model graded -o {d}/bb", ["--model graded", "score on their scale", "calibrate RATINGS --model graded"]),
    ("build-bank-logs-contradict", "build-bank {d}/logs_contradict -o {d}/bb", ["contradict themselves", "'acc'", "gold answer"]),
    ("score-ordinal-unseen-category", "score {d}/rat_unseen.csv --bank {d}/graded.csv", ["rating 2 of model 'm2' on item 'q3'", "outside the item's scale 0-1", "set when it is calibrated: --rating-range LO HI", "levels observed at calibration: 0;1"]),
    ("simulate-ordinal-unseen-category", "simulate {d}/rat_unseen.csv --bank {d}/graded.csv -o {d}/simo", ["rating 2 of model 'm2' on item 'q3'", "outside the item's scale 0-1", "levels observed at calibration: 0;1"]),
    ("calibrate-ordinal-non-integer", "calibrate {d}/rat_half.csv --model graded -o {d}/o/b.csv", ["2.5", "row 2", "'m2'", "'q3'", "integer"]),
    ("calibrate-ordinal-one-level", "calibrate {d}/rat_one.csv --model gpcm -o {d}/o/b.csv", ["'q5'", "only the level 3", "--drop-empty"]),
    ("calibrate-ordinal-range", "calibrate {d}/rat.csv --model graded --rating-range 1 3 -o {d}/o/b.csv", ["rating 4", "declared range [1, 3]"]),
    ("calibrate-ordinal-range-reversed", "calibrate {d}/rat.csv --model graded --rating-range 4 1 -o {d}/o/b.csv", ["rating range", "LO < HI", "[4, 1]"]),
    ("evaluate-graded-request-subject", "evaluate --bank {d}/graded.csv --subject completions:http://127.0.0.1:9/v1 --llm x -o {d}/evg", ["completions:", "graded / gpcm bank has none", "cmd:COMMAND", "replay:"]),
    ("info-folder-empty-link", "info {d}/bd_empty_link", ["bd_empty_link/link.json", "cannot be read", "build-bank"]),
    ("score-folder-list-link", "score {d}/resp.csv --bank {d}/bd_list_link", ["--bank", "link.json", "JSON array, not an object"]),
    ("items-folder-null-manifest", "items --bank {d}/bd_null_manifest", ["manifest.json", "JSON null"]),
    ("info-folder-manifest-types", "info {d}/bd_int_metric", ["manifest.json", "'source.metric' is 5", "string"]),
    ("design-folder-broken-requests", "design --bank {d}/bd_broken_requests -k 3", ["requests.jsonl", "line 2", "not JSON"]),
    ("compare-run-json-null", "compare {d}/run_null_json", ["run.json", "not a benchmark run's record"]),
    ("compare-run-summary-empty", "compare {d}/run_empty_summary", ["summary.csv", "cannot be read"]),
    ("report-run-reference-columns", "report {d}/run_bad_reference -o {d}/rep.html", ["reference.csv", "'theta_ref'"]),
    ("design-seed-negative", "design --bank {d}/bank.csv -k 3 --seed -1", ["--seed", ">= 0", "-1"]),
    ("benchmark-seed-negative", "benchmark {d}/resp.csv -o {d}/bm --seed -1", ["--seed", ">= 0"]),
    ("arena-simulate-seed-negative", "arena simulate --seed -1", ["--seed", ">= 0"]),
    ("simulate-seed-negative", "simulate --bank {d}/bank.csv --thetas {d}/th.csv -o {d}/sim --seed -1", ["--seed", ">= 0"]),
    ("evaluate-seed-huge", "evaluate --bank {d}/bank.csv --subject replay:{d}/resp.csv#m0 -o {d}/evs --seed 99999999999999999999", ["seed", "2**63"]),
    ("link-quadpts-huge", "link {d}/bank.csv {d}/bank.csv -o {d}/l.csv --quadpts 99999999999999999999", ["--quadpts", "at most 10001"]),
    ("calibrate-quadpts-huge", "calibrate {d}/resp.csv -o {d}/o/b.csv --quadpts 99999999999999999999", ["--quadpts", "at most 10001"]),
    ("arena-fit-prior-games-inf", "arena fit {d}/battles.csv --prior-games inf", ["--prior-games", "[0, 1e+06]", "inf"]),
    ("arena-fit-prior-games-huge", "arena fit {d}/battles.csv --prior-games 1e20", ["--prior-games", "[0, 1e+06]"]),
    ("arena-schedule-pairs-huge", "arena schedule {d}/battles.csv -n 99999999999999999999", ["-n/--pairs", "[1, 10000]"]),
    ("score-bank-column-twice", "score {d}/resp.csv --bank {d}/dupcol_bank.csv", ["dupcol_bank.csv", "column 'a' twice"]),
    ("info-bank-column-twice-quoted", "info {d}/dupcol_bank_quoted.csv", ["dupcol_bank_quoted.csv", "column 'a' twice"]),
    ("info-nul-in-bank-id", "info {d}/nul_bank.csv", ["nul_bank.csv", "NUL byte", "row 0"]),
    ("score-nul-in-header", "score {d}/nul_header.csv --bank {d}/bank.csv", ["nul_header.csv", "NUL byte", "header"]),
    ("simulate-bank-dir-not-folder", "simulate --bank {d}/adir --thetas {d}/th.csv -o {d}/sim", ["adir", "directory", "manifest.json"]),
]


@pytest.mark.parametrize("argv,needles", [pytest.param(a, n, id=i) for i, a, n in CLI_CASES])
def test_cli_malformed(ws, capsys, argv, needles):
    rc = main([part.format(d=ws) for part in argv.split()])
    err = capsys.readouterr().err
    assert rc == 2, f"exit code {rc}, stderr: {err!r}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    assert lines[0].startswith("error: ") and "Traceback" not in err and "Aborted" not in err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"


# ------------------------------------------------------------------------------ API cases
def _snapshot():
    bank = _bank()
    s = CATSession(bank, CATConfig(min_items=3, max_items=6), np.random.default_rng(0))
    for _ in range(3):
        s.record(s.next_item(), 1)
    return bank, s.to_dict()


def _drop(d, key):
    d = dict(d)
    d.pop(key)
    return d


def _api_cases():
    bank = _bank()
    arr = _responses().drop(columns="model").to_numpy(float)
    one = ResponseMatrix(arr[:1], ["m0"], IDS)
    zero = ItemBank(IDS, np.zeros(N_ITEMS), bank.b)
    flat = ItemBank(IDS, bank.a, np.zeros(N_ITEMS))
    bad2, badm1 = arr[:3].copy(), arr[:3].copy()
    bad2[1, 4], badm1[2, 7] = 2, -1
    sb, snap = _snapshot()
    short = dict(snap, scores=snap["scores"][:-1])
    return [
        ("ordinal-non-integer", lambda: at.calibrate(arr * 3 + np.where(np.arange(N_ITEMS) == 4, 0.5, 0), model="graded"), ConfigError, ["row 0", "'4'", "not an integer"]),
        ("ordinal-one-level", lambda: at.calibrate(np.column_stack([arr[:, :3], np.ones(len(arr))]), model="gpcm"), ConfigError, ["'3'", "only the level 1"]),
        ("ordinal-range", lambda: at.calibrate(arr + 1, model="graded", value_range=(0, 1)), ConfigError, ["rating 2", "[0, 1]"]),
        ("ordinal-range-reversed", lambda: at.calibrate(arr + 1, model="graded", value_range=(2, 1)), ConfigError, ["LO < HI", "[2, 1]"]),
        ("ordinal-bank-disordered", lambda: PolyBank(["q"], [[1.0, -1.0, 1.0]]), BankError, ["'q'", "decrease"]),
        ("ordinal-score-off-scale", lambda: estimate_ability(np.full((1, 1), 9.0), PolyBank(["q"], [[1.0, 0.0]])), ConfigError, ["rating 9", "scale 0-1", "calibration: 0;1"]),
        ("rm-text", lambda: ResponseMatrix([["a", 1], [0, 1]]), ResponseDataError, ["'a'", "row 0"]),
        ("rm-value-2", lambda: ResponseMatrix(np.array([[2.0, 1.0]])), ResponseDataError, ["outside"]),
        ("rm-inf", lambda: ResponseMatrix([[np.inf, 1.0]]), ResponseDataError, ["outside"]),
        ("rm-frame-text", lambda: ResponseMatrix.from_frame(pd.DataFrame({"q": ["x", 1]}, index=["a", "b"])),
         ResponseDataError, ["'x'", "'q'"]),
        ("rm-empty", lambda: ResponseMatrix(np.empty((0, 3))), ResponseDataError, ["empty"]),
        ("bank-dup", lambda: ItemBank(["q1", "q1"], [1, 1], [0, 0]), BankError, ["'q1'", "rows [0, 1]"]),
        ("bank-huge-a", lambda: ItemBank(["q"], [1e308], [0]), BankError, ["'a'", "q (row 0"]),
        ("bank-huge-b", lambda: ItemBank(["q"], [1.0], [1e9]), BankError, ["'b'"]),
        ("bank-nan", lambda: ItemBank(["q"], [1.0], [np.nan]), BankError, ["'b'", "not finite"]),
        ("bank-index-of-missing", lambda: bank.index_of("q19"), BankError, ["'q19'"]),
        ("ability-value-2", lambda: estimate_ability(bad2, bank), ResponseDataError, ["outside", "row 1"]),
        ("ability-value-minus1", lambda: estimate_ability(badm1, bank, "wle"), ResponseDataError, ["-1"]),
        ("ability-prior-nan", lambda: estimate_ability(arr, bank, prior_mean=np.nan), ConfigError, ["prior_mean"]),
        ("ability-prior-sd", lambda: estimate_ability(arr, bank, prior_sd=-1), ConfigError, ["prior_sd"]),
        ("ability-method", lambda: estimate_ability(arr, bank, "mle2"), ConfigError, ["mle2"]),
        ("ability-shape", lambda: estimate_ability(arr[:, :5], bank), ResponseDataError, ["shape"]),
        ("ability-bank-name", lambda: estimate_ability(arr, "arc"), ConfigError, ["'arc'", "ItemBank"]),
        ("ability-quadpts", lambda: estimate_ability(arr, bank, quadpts=1), ConfigError, ["quadpts"]),
        ("eap-prior-sd", lambda: eap(arr, bank, prior_sd=0), ConfigError, ["prior_sd"]),
        ("wle-value-2", lambda: wle(bad2, bank), ResponseDataError, ["outside"]),
        ("calibrate-one-item", lambda: at.calibrate(arr[:, :1], model="2pl"), ResponseDataError, ["1 item"]),
        ("calibrate-two-items-3pl", lambda: at.calibrate(arr[:, :2], model="3pl"), ResponseDataError, ["2 item"]),
        ("calibrate-one-subject", lambda: at.calibrate(arr[:1], model="2pl"), ResponseDataError, ["subject"]),
        ("calibrate-text", lambda: at.calibrate([["x", 1], [0, 1]]), ResponseDataError, ["'x'"]),
        ("calibrate-model", lambda: at.calibrate(arr, model="5pl"), ConfigError, ["5pl"]),
        ("m2-one-subject", lambda: irt_fit.m2(one, bank), ResponseDataError, ["at least 2"]),
        ("link-zero-a", lambda: link_banks(bank, zero), ConfigError, ["a > 0"]),
        ("link-flat-b", lambda: link_banks(bank, flat, "mean-sigma"), ConfigError, ["spread"]),
        ("snapshot-no-rng", lambda: CATSession.from_dict(_drop(snap, "rng"), sb), ConfigError, ["'rng'"]),
        ("snapshot-short-scores", lambda: CATSession.from_dict(short, sb), ConfigError, ["scores"]),
        ("snapshot-not-dict", lambda: CATSession.from_dict("{}", sb), ConfigError, ["dict"]),
        ("snapshot-bad-event", lambda: CATSession.from_dict(dict(snap, events=[["x"]] + snap["events"][1:]), sb),
         ConfigError, ["event 0"]),
        ("link-bank-name", lambda: link_banks(bank, "arc"), ConfigError, ["'arc'", "ItemBank"]),
        ("bank-bad-model", lambda: ItemBank(["q"], [1.0], [0.0], model="9pl"), BankError, ["9pl"]),
        ("calibrate-missing-path", lambda: at.calibrate("no_such_matrix.csv"), ResponseDataError,
         ["no_such_matrix.csv", "does not exist"]),
        ("config-se-stop-nan", lambda: CATConfig(se_stop=float("nan")), ConfigError, ["se_stop"]),
        ("session-record-nan", lambda: CATSession(bank).record("q1", float("nan")), ResponseDataError,
         ["'q1'", "[0, 1]"]),
        ("session-record-unknown", lambda: CATSession(bank).record("zz", 1), AtlasError, ["'zz'"]),
        ("from-long-text", lambda: ResponseMatrix.from_long(
            pd.DataFrame({"subject": ["a"], "item": ["q"], "score": ["x"]})), ResponseDataError, ["'x'", "row 0"]),
        ("rm-weights-nan", lambda: ResponseMatrix(np.eye(2), weights=[np.nan, 1]), ResponseDataError, ["weights"]),
        ("rm-missing-subject-id", lambda: ResponseMatrix.from_frame(
            pd.DataFrame({"q": [1, 0]}, index=["a", None])), ResponseDataError, ["subject id", "row(s) [1]"]),
        ("bankref-unknown", lambda: at.catalogue.BankRef.from_option("nope"), BankError,
         ["'nope'", "paper-arc", "openllm-v1"]),
        ("resolve-responses-unknown", lambda: at.catalogue.resolve_responses("nope"), ResponseDataError, ["'nope'"]),
    ]


API_CASES = _api_cases()


@pytest.mark.parametrize("call,exc,needles", [pytest.param(c, e, n, id=i) for i, c, e, n in API_CASES])
def test_api_malformed(call, exc, needles):
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg.strip()
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


FILE_API = [
    ("read-nonutf8", lambda d: ResponseMatrix.read(d / "nonutf8_resp.csv"), ResponseDataError, ["nonutf8_resp.csv", "UTF-8"]),
    ("read-truncated-gz", lambda d: ResponseMatrix.read(d / "trunc.csv.gz"), ResponseDataError, ["gzip"]),
    ("read-semicolon", lambda d: ResponseMatrix.read(d / "semicolon.csv"), ResponseDataError, ["';'"]),
    ("bank-read-corrupt", lambda d: ItemBank.read(d / "corrupt.parquet"), BankError, ["Parquet"]),
    ("bank-read-dir", lambda d: ItemBank.read(d / "adir"), BankError, ["directory"]),
    ("bank-write-dir", lambda d: _bank().write(d / "adir"), ConfigError, ["directory"]),
    ("rm-write-under-file", lambda d: ResponseMatrix(np.eye(2)).write(d / "afile" / "x.csv"), ConfigError, ["afile"]),
]


@pytest.mark.parametrize("call,exc,needles", [pytest.param(c, e, n, id=i) for i, c, e, n in FILE_API])
def test_file_api_malformed(ws, call, exc, needles):
    with pytest.raises(exc) as info:
        call(ws)
    for needle in needles:
        assert needle in str(info.value)


def test_catalogue_size():
    assert len(CLI_CASES) + len(API_CASES) + len(FILE_API) >= 80
    commands = {a.split()[0] for _, a, _ in CLI_CASES if a}
    assert commands >= {"calibrate", "fit", "score", "items", "info", "simulate", "link",
                        "benchmark", "design", "ranks", "compare", "report", "arena", "evaluate",
                        "runs", "build-bank"}


# --------------------------------------------------- degenerate but valid: finite answers
def test_index_of_single_string_is_not_split():
    bank = _bank()
    assert bank.index_of("q11") == 11
    assert list(bank.index_of(["q11", "q1"])) == [11, 1]


def test_extreme_but_allowed_bank_gives_finite_fit_and_scores(tmp_path):
    """Parameters at the ItemBank limits still give finite scores and fit statistics."""
    from atlascat.validation import MAX_ABS_A, MAX_ABS_B

    bank = _bank()
    a, b = bank.a.copy(), bank.b.copy()
    a[3], b[3] = MAX_ABS_A, MAX_ABS_B
    edge = ItemBank(IDS, a, b)
    rm = ResponseMatrix.from_frame(_responses())
    for method in ("eap", "wle", "map"):
        df = estimate_ability(rm, edge, method)
        # an answer the item makes impossible pushes WLE/MAP to the search bound: flagged so
        assert np.isfinite(df["theta"]).all() and np.isfinite(df["se"]).all()
        assert set(df["flag"]) <= {"ok", "at_bound"}
    res = irt_fit.m2(rm, edge, estimated="none")
    for key in ("M2", "RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR"):
        assert math.isfinite(getattr(res, key)), key


def test_simulate_summary_is_strict_json(ws, tmp_path):
    th = tmp_path / "th.csv"
    pd.DataFrame({"subject_id": ["lo", "hi"], "theta": [-10.0, 10.0]}).to_csv(th, index=False)
    out = tmp_path / "sim"
    assert main(["simulate", "--bank", str(ws / "bank.csv"), "--thetas", str(th), "-o", str(out),
                 "--min-items", "3", "--max-items", "8"]) == 0
    text = (out / "summary.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    json.loads(text)


def test_all_missing_subject_is_flagged_not_ok():
    bank = _bank()
    y = np.full((2, N_ITEMS), np.nan)
    y[0, :3] = [1, 0, 1]
    df = estimate_ability(y, bank, "wle")
    assert df["flag"].tolist() == ["ok", "no_items"]


def test_identified_small_calibration_is_finite_or_refused():
    """Three items under a 1PL are identified: the result must be finite (never a ridge)."""
    y = _responses(200).drop(columns="model").to_numpy(float)[:, [2, 5, 9]]
    res = at.calibrate(y, model="1pl")
    assert np.all(np.isfinite(res.bank.a)) and np.all(np.abs(res.bank.b) < 20)


def test_errors_never_eat_markup_or_become_emoji(ws, capsys):
    """Messages are printed literally: '[...]' stays, ':abc:' stays text."""
    assert main(["fit", str(ws / "resp.csv"), "--bank", "[live]:abc:"]) == 2
    err = capsys.readouterr().err
    assert "[live]:abc:" in err


def test_benchmark_offers_the_drop_empty_it_suggests(capsys):
    main(["benchmark", "--help"])
    assert "--drop-empty" in capsys.readouterr().out


def test_replay_matrix_not_found_is_the_readers_line(ws, capsys):
    """replay: naming a file that is not there, or an unknown bundled name: the reader's own
    line (the path to check, or the bundled names), not an exception class in parentheses."""
    for spec, needles in ((f"{ws}/nosuch.csv", ["nosuch.csv", "does not exist", "check the path"]),
                          ("arcc", ["replay matrix 'arcc'", "bundled response matrix (arc,"])):
        rc = main(["evaluate", "--bank", "arc", "--subject", f"replay:{spec}#m0",
                   "-o", f"{ws}/evr"])
        line = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in line and line.startswith("error: "), line
        assert "Error:" not in line and "Error " not in line, line
        for needle in needles:
            assert needle in line, (needle, line)


def test_build_bank_wrong_task_or_path_says_what_is_there(tmp_path, capsys):
    """--task naming a task the logs do not hold lists the tasks they hold; a results path that
    does not exist is named as such even with --task (not "a response matrix holds one score");
    the harness's results_*.json (aggregates) is told to rerun with --log_samples."""
    logs = tmp_path / "runs" / "org__model-a"
    logs.mkdir(parents=True)
    (logs / "samples_mytask_2024-05-01T10-00-00.123456.jsonl").write_text("{}\n")
    results = logs / "results_2024-05-01T10-00-00.123456.json"     # the harness's aggregate
    results.write_text('{"results": {"mytask": {"acc,none": 0.5}}}\n')
    for argv, needles in (
            ([str(tmp_path / "runs"), "--task", "my_task"],
             ["for task 'my_task'", "the logs there are of mytask", "--task"]),
            ([str(tmp_path / "nosuch"), "--task", "mytask"], ["nosuch", "does not exist"]),
            ([str(results)], ["aggregate results", "--log_samples", "samples_<task>_*.jsonl"])):
        rc = main(["build-bank", *argv, "-o", str(tmp_path / "b")])
        line = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in line and line.startswith("error: "), line
        for needle in needles:
            assert needle in line, (needle, line)


def test_build_bank_chance_in_percent_and_scores_for_few_models(ws, tmp_path, capsys):
    """--chance 25 (a percent) is told its 0-1 value; --scores naming a few of the models says
    how many it covers and one it lacks; both before any calibration, one line, exit 2."""
    resp = pd.read_csv(ws / "resp.csv", index_col=0)
    pd.DataFrame({"model": resp.index[:5], "score": resp.mean(axis=1)[:5]}).to_csv(
        tmp_path / "few.csv", index=False)
    for extra, needles in ((["--chance", "25"], ["--chance 25 is outside 0-1", "give 0.25"]),
                           (["--scores", str(tmp_path / "few.csv")],
                            ["only 5 of the", "none for", "under its id"])):
        rc = main(["build-bank", str(ws / "resp.csv"), "-o", str(tmp_path / "b"), *extra])
        line = capsys.readouterr().err.strip()
        assert rc == 2 and line.startswith("error: ") and "\n" not in line, line
        for needle in needles:
            assert needle in line, (needle, line)



def test_test_length_beyond_the_bank_asks_the_whole_bank(ws, tmp_path, capsys):
    """--max-items / --fixed-length far above the bank's size (10**20) is a test of the whole
    bank, not a history array of that many columns (a MemoryError or a numpy traceback)."""
    s = CATSession(_bank(), CATConfig.fixed_length(10**20), np.random.default_rng(0))
    for _ in range(N_ITEMS):
        s.record(s.next_item(), 1)
    assert len(s.to_dict()["scores"]) == N_ITEMS
    rc = main(["evaluate", "--bank", str(ws / "bank.csv"), "--subject",
               f"replay:{ws}/resp.csv#m0", "-o", str(tmp_path / "ev"),
               "--fixed-length", str(10**20)])
    assert rc == 0, capsys.readouterr().err
    assert f"{N_ITEMS} of the items asked" in capsys.readouterr().out


def test_bank_file_with_extra_columns_runs_and_writes_its_page(ws, tmp_path, capsys):
    """A bank file with extra columns of its own (a note, not question/answer content) is read,
    its run's page written without those content columns (it was a KeyError 'question')."""
    frame = _bank().to_frame()
    frame["note"] = "checked"
    frame.to_csv(tmp_path / "bank_note.csv", index=False)
    rc = main(["evaluate", "--bank", str(tmp_path / "bank_note.csv"), "--subject",
               f"replay:{ws}/resp.csv#m0", "-o", str(tmp_path / "ev"), "--max-items", "4"])
    assert rc == 0, capsys.readouterr().err
    assert list((tmp_path / "ev" / "reports").glob("*.html"))


def test_batch_beyond_the_bank_is_one_round_of_the_whole_bank(ws, tmp_path, capsys):
    """--batch-size far above the bank's size (10**20) asks the whole bank in one round, in
    simulate and in a live run (it was a numpy dimension error / a SQLite integer overflow)."""
    huge = str(10**20)
    assert main(["simulate", "--bank", str(ws / "bank.csv"), "--thetas", str(ws / "th.csv"),
                 "-o", str(tmp_path / "sim"), "--batch-size", huge]) == 0, capsys.readouterr().err
    rc = main(["evaluate", "--bank", str(ws / "bank.csv"), "--subject",
               f"replay:{ws}/resp.csv#m0", "-o", str(tmp_path / "ev"), "--batch-size", huge])
    assert rc == 0, capsys.readouterr().err


def test_fit_prints_undefined_not_nan(ws, tmp_path, capsys):
    """Two subjects leave CFI/TLI undefined (the warning says so): the line prints 'undefined',
    never 'nan' where a number is promised."""
    pd.read_csv(ws / "resp.csv").head(2).to_csv(tmp_path / "two.csv", index=False)
    assert main(["fit", str(tmp_path / "two.csv"), "--bank", str(ws / "bank.csv")]) == 0
    out = capsys.readouterr().out
    assert "TLI = undefined" in out and "CFI = undefined" in out
    assert " nan" not in out.split("S-X2")[0]


def test_undefined_statistics_print_undefined(ws, tmp_path, capsys):
    """One examinee has no overlap between tests; a bank of a = 0 gives every model one theta,
    whose rank correlation is undefined: both print 'undefined', not 'nan'."""
    pd.DataFrame({"subject_id": ["a"], "theta": [0.5]}).to_csv(tmp_path / "one.csv", index=False)
    assert main(["simulate", "--bank", str(ws / "bank.csv"), "--thetas", str(tmp_path / "one.csv"),
                 "-o", str(tmp_path / "sim")]) == 0
    out = capsys.readouterr().out
    assert "undefined / undefined" in out and "nan" not in out
    assert main(["ranks", str(ws / "resp.csv"), "--bank", str(ws / "bank_zero_a.csv")]) == 0
    out, err = capsys.readouterr()
    assert "every model has the same theta" in err
    assert "Spearman undefined, Kendall undefined" in out and "nan" not in out


def test_design_on_a_bank_without_information_says_undefined(ws, capsys):
    """A bank of a = 0 carries no information: the ratio to the random forms is undefined,
    printed so (not 'nan' after numpy's division warning)."""
    assert main(["design", "--bank", str(ws / "bank_zero_a.csv"), "-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "(ratio undefined)" in out and "nan" not in out


def test_fit_item_without_df_prints_a_dash(ws, tmp_path, capsys):
    """An item whose collapsed S-X2 table has no degree of freedom left (few subjects, an easy
    item) has no statistic: its row shows '-', as the other missing cells, never 'nan'."""
    resp = pd.read_csv(ws / "resp.csv").head(30)
    resp.loc[:27, "q0"] = 1
    resp.to_csv(tmp_path / "few.csv", index=False)
    assert main(["fit", str(tmp_path / "few.csv"), "--bank", str(ws / "bank.csv")]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.split("S-X2 item fit")[1]
