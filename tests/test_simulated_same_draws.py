"""One rule for a simulated model, offline and live: row ID (theta T) of ``atlas simulate
--bank B --thetas FILE --seed S`` is the live model ``atlas evaluate --bank B --subject
simulate:T --llm ID --seed S``, whose answer seed (no :SEED typed) is A = ``answer_seed(S,
ID)``, as ``simulate:T:A`` with it typed: it draws its choices from
``subject_generator(S, ID)`` and answers item j at ``item_uniform(A, j)``, so the two ask the
same items, get the same answers and give the same theta, SE and prediction, on a binary bank
folder, a folder of continuous scores, a shipped bank and a graded bank. (``simulate
--thetas`` drew each model's uniforms in sequence from ``rng.spawn``, the live subject one per
item keyed by (seed, item): the two parted from the first or second item.) Two models of one
file at the same theta still draw independently (their answer seeds differ)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.answers import answer_seed, item_uniform
from atlascat.cli import main

SEED = 4
#: the file's models: two at one theta (independent draws), one other
THETAS = {"m0": 0.3, "m1": 0.3, "m2": -0.8}


@pytest.fixture(scope="module")
def banks(tmp_path_factory, shared_data):
    """{kind: (--bank, options both commands take)} and the --thetas file."""
    from atlascat.irt.polybank import PolyBank

    root = tmp_path_factory.mktemp("same_draws")
    rng = np.random.default_rng(11)
    # a binary folder: a 2PL matrix of 60 models on 40 items
    a, b = rng.lognormal(0.2, 0.3, 40), rng.normal(0, 1, 40)
    theta = rng.normal(0, 1, 60)
    y = (rng.random((60, 40)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    pd.DataFrame(y, index=[f"s{i}" for i in range(60)], columns=[f"q{j}" for j in range(40)]) \
        .rename_axis("model").to_csv(root / "binary.csv")
    # a continuous folder: QMSum's ROUGE of 30 source models
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df.iloc[np.random.default_rng(0).permutation(len(df))[:30]].to_csv(root / "qmsum.csv")
    for name in ("binary", "qmsum"):
        assert main(["build-bank", str(root / f"{name}.csv"), "--name", name, "-q",
                     "-o", str(root / name)]) == 0
    ids = [f"p{j}" for j in range(15)]
    ga = rng.lognormal(0.2, 0.3, 15)
    d = -np.sort(rng.normal(0, 1.2, (15, 4)), axis=1) * ga[:, None]
    PolyBank(ids, np.column_stack([ga, d]), "graded", [np.arange(1.0, 6.0)] * 15) \
        .write(root / "graded.csv")
    pd.DataFrame({"subject_id": list(THETAS), "theta": list(THETAS.values())}) \
        .to_csv(root / "thetas.csv", index=False)
    adaptive = ["--design", "adaptive"]   # a folder's live default is its predictor
    return root, {"binary-folder": (str(root / "binary"), [*adaptive, "--max-items", "15"]),
                  "continuous-folder": (str(root / "qmsum"), [*adaptive, "--max-items", "15"]),
                  "shipped": ("arc", ["--max-items", "50"]),
                  "graded": (str(root / "graded.csv"), ["--max-items", "10"])}


def _simulate(root, bank, options, out):
    sim_options = [o for o in options if o not in ("--design", "adaptive")]
    assert main(["simulate", "--bank", bank, "--thetas", str(root / "thetas.csv"), "--seed",
                 str(SEED), *sim_options, "-q", "-o", str(out)]) == 0
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str}) \
        .set_index("subject_id")
    asked = pd.read_csv(out / "selected_items.csv", dtype={"subject_id": str, "item_id": str})
    return persons, asked


def _live(bank, options, model, out, *, typed_seed: bool = False) -> dict:
    """The live model: ``simulate:T`` as typed, or with its answer seed typed (``:A``)."""
    subject = f"simulate:{THETAS[model]}" + (f":{answer_seed(SEED, model)}" if typed_seed
                                             else "")
    assert main(["evaluate", "--bank", bank, "--subject", subject, "--llm", model, "--seed",
                 str(SEED), *options, "-q", "-o", str(out)]) == 0
    return json.loads((out / "results.json").read_text())[0]


#: options both commands take, beside each kind's own: rounds of items, randomesque picks, KL
EXTRA = {"binary-folder": ["--batch-size", "3", "--randomesque", "2"],
         "continuous-folder": ["--selection", "kl"], "shipped": ["--batch-size", "4"]}


@pytest.mark.parametrize("kind, extra", [
    *[(k, "") for k in ("binary-folder", "continuous-folder", "shipped", "graded")],
    *[(k, "extra") for k in EXTRA]])
def test_simulate_thetas_and_a_live_simulated_model_agree(banks, kind, extra, tmp_path):
    """The same items in the same order, the same answers, theta, SE, stop reason and
    predicted score with its interval, for each model of the file (with each kind's options,
    and with rounds of items, randomesque picks or KL selection)."""
    root, kinds = banks
    bank, options = kinds[kind]
    options = [*options, *(EXTRA[kind] if extra else [])]
    persons, asked = _simulate(root, bank, options, tmp_path / "sim")
    order = "order" if "order" in asked.columns else "step"
    for model in ("m0", "m2"):   # m0 as typed plainly, m2 with its answer seed typed
        row = _live(bank, options, model, tmp_path / f"live_{model}", typed_seed=model == "m2")
        mine = asked[asked["subject_id"] == model].sort_values(order)
        assert [str(i) for i in row["items"]] == mine["item_id"].tolist(), (kind, model)
        np.testing.assert_allclose(row["scores"], mine["score"].to_numpy(float), atol=1e-9,
                                   err_msg=f"{kind} {model}")
        assert row["theta"] == pytest.approx(persons.loc[model, "theta"], abs=1e-9)
        assert row["se"] == pytest.approx(persons.loc[model, "se"], abs=1e-9)
        assert row["stop_reason"] == persons.loc[model, "stop_reason"]
        pred = row.get("prediction") or {}
        if kind != "graded":   # a graded bank's mean rating: person_scores has no score
            assert ("score" in pred) == ("score" in persons.columns), (kind, pred)
        if "score" in pred and "score" in persons.columns:
            np.testing.assert_allclose(
                [pred["score"], pred["lo"], pred["hi"]],
                persons.loc[model, ["score", "score_lo", "score_hi"]].to_numpy(float),
                rtol=1e-9, err_msg=f"{kind} {model}")
    # two models at one theta are two models: independent draws, not one twice
    one, two = (asked[asked["subject_id"] == m].sort_values(order) for m in ("m0", "m1"))
    assert (one["item_id"].tolist() != two["item_id"].tolist()
            or not np.allclose(one["score"].to_numpy(float), two["score"].to_numpy(float)))


def test_the_offline_answers_are_the_live_subjects_draws(banks, tmp_path):
    """A model of the file answers each item it was asked at its own keyed uniform: 1 iff
    item_uniform(answer_seed(S, ID), j) < P_j(theta) (the shipped bank's 3PL)."""
    from atlascat.catalogue import BankRef

    root, kinds = banks
    bank, options = kinds["shipped"]
    _, asked = _simulate(root, bank, options, tmp_path / "sim")
    items = BankRef.from_option("arc").load()
    for model, theta in THETAS.items():
        mine = asked[asked["subject_id"] == model]
        p = dict(zip(items.item_ids, np.asarray(items.probability(theta)).reshape(-1)))
        want = [float(item_uniform(answer_seed(SEED, model), j) < p[j]) for j in mine["item_id"]]
        assert mine["score"].tolist() == want, model
    assert len({answer_seed(SEED, m) for m in THETAS}) == len(THETAS)
    assert answer_seed(SEED, "m0") != answer_seed(SEED + 1, "m0")


def test_the_answer_seed_of_simulate_theta_is_the_runs_models(tmp_path):
    """``simulate:THETA`` without SEED answers with ``answer_seed(run seed, name)`` wherever it
    is built (``--llm`` or the default name; the command line's ``--seed``, Python's
    ``seed=``, default 0, and in a run ``LiveRun.start``'s ``seed``); a typed SEED keeps its
    meaning; the run stores the seed it answered
    with, so a resumed run (rebuilt from the store, under another seed) answers the same."""
    from atlascat import CATConfig
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import SubjectSpec
    from atlascat.suite import SuiteConfig

    def built(text, model=None, **kw):
        return SubjectSpec.parse(text, model).build("arc", **kw)

    assert built("simulate:0.3", "m0", seed=SEED).seed == answer_seed(SEED, "m0")
    assert built("simulate:0.3", "m0").seed == answer_seed(0, "m0")
    assert built("simulate:0.3").seed == answer_seed(0, "simulated(theta=0.3)")
    assert built("simulate:0.3:7", "m0", seed=SEED).seed == 7
    # Python: built without a seed, started with one: the run's model (as --seed gives it)
    live = LiveRun.start(tmp_path / "py.sqlite", "arc", [built("simulate:0.3", "m0")],
                         config=CATConfig(min_items=5, max_items=5), seed=SEED)
    assert live.jobs[0].subject.seed == answer_seed(SEED, "m0")
    assert RunStore(tmp_path / "py.sqlite").get_run(live.jobs[0].run_id)["subject"]["seed"] \
        == answer_seed(SEED, "m0")
    typed = LiveRun.start(tmp_path / "py7.sqlite", "arc", [built("simulate:0.3:7", "m0")],
                          config=CATConfig(min_items=5, max_items=5), seed=SEED)
    assert typed.jobs[0].subject.seed == 7
    # a suite: one model, the suite's seed (its config's, --seed), items <benchmark>/<id>
    ref = BankRef.from_option("openllm-v1", kinds=("suite",))
    suite = LiveRun.start(tmp_path / "suite.sqlite", ref,
                          [SubjectSpec.parse("simulate:0.3", "m0").build(ref)],
                          config=SuiteConfig(seed=SEED))
    assert suite.jobs[0].subject.seed == answer_seed(SEED, "m0")
    for started in (live, typed, suite):
        started.close()                               # the stores they opened
    again = SubjectSpec.rebuild(built("simulate:0.3", "m0", seed=SEED).describe(), "arc",
                                seed=SEED + 1)
    assert again.seed == answer_seed(SEED, "m0") and again.name == "m0"
    # the command line: the stored subject of --llm m0 --seed 4, and of no --llm nor --seed
    for extra, name, seed in ((["--llm", "m0", "--seed", str(SEED)], "m0", SEED),
                              ([], "simulated(theta=0.3)", 0)):
        out = tmp_path / name
        assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.3", *extra,
                     "--max-items", "5", "-q", "-o", str(out)]) == 0
        store = RunStore(out / "runs.sqlite")
        subject = store.get_run(store.list_runs()["run_id"].iloc[0])["subject"]
        assert subject["seed"] == answer_seed(seed, name), subject


def test_a_suite_refuses_thetas_in_one_line(tmp_path, capsys):
    """`atlas simulate --suite` replays recorded answers only: --thetas is refused in one line
    naming the live way (it was ignored: the suite replayed the matrices as if not given)."""
    th = tmp_path / "th.csv"
    th.write_text("subject_id,theta\nm0,0.3\n")
    code = main(["simulate", "--suite", "openllm-v1", "arc=arc", "--thetas", str(th), "-q",
                 "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--subject simulate:THETA" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
