"""``atlas evaluate --bank DIR --subject replay:LOGS#MODEL`` on a bank folder built from
lm-evaluation-harness sample logs: the held-out model's logs (a folder as the harness writes
them, one model per folder, or its ``.jsonl`` file) are read with the folder's task, metric,
filter and scale exactly as ``atlas simulate --bank DIR LOGS`` reads them, so the live replay
and simulate with the same seed ask the same items and predict the same score (it said
"response file 'LOGS' is a directory"). Bad input is one line, exit 2."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main

from lmeval_logs import generation_logs


def _main(argv) -> int:
    return main([str(a) for a in argv])


def _simulate(bank, logs, out, *options):
    assert _main(["simulate", logs, "--bank", bank, *options, "-q", "-o", out]) == 0
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str}) \
        .set_index("subject_id")
    asked = pd.read_csv(out / "selected_items.csv", dtype={"subject_id": str, "item_id": str})
    return persons, asked


def _replayed(bank, logs, model, out, *options, db=None):
    argv = ["evaluate", "--bank", bank, "--subject", f"replay:{logs}#{model}", *options, "-q",
            "-o", out] + (["--db", db] if db else [])
    assert _main(argv) == 0
    return json.loads((out / "results.json").read_text())[0]


def _same(persons, asked, model, row):
    order = "order" if "order" in asked.columns else "step"
    mine = asked[asked["subject_id"] == model].sort_values(order)["item_id"].tolist()
    assert [str(i) for i in row["items"]] == mine, model
    pred = row["prediction"]
    np.testing.assert_allclose([pred["score"], pred["lo"], pred["hi"]],
                               persons.loc[model, ["score", "score_lo", "score_hi"]]
                               .to_numpy(float), rtol=1e-9, err_msg=model)


@pytest.mark.parametrize("design", [[], ["--design", "adaptive"]], ids=["predictor", "adaptive"])
def test_a_live_replay_of_logs_equals_simulate_of_them(mc2_folder, design, tmp_path):
    """TruthfulQA's requests scored by mc2 (a continuous score answered through the requests):
    every held-out model's logs replayed live ask simulate's items, in its order, and predict
    its score and interval, with the benchmark predictor and with the adaptive test."""
    bank, logs = mc2_folder / "bank", mc2_folder / "logs_held_out"
    persons, asked = _simulate(bank, logs, tmp_path / "sim", "--seed", "3", *design)
    assert len(persons) == 3
    for model in persons.index:
        row = _replayed(bank, logs, model, tmp_path / model.replace("/", "_"), "--seed", "3",
                        *design)
        _same(persons, asked, model, row)
    # one model's own folder (as the harness writes it) and its .jsonl file: the same test
    model = persons.index[1]
    folder = logs / model.replace("/", "__")
    for given in (folder, next(folder.glob("samples_*.jsonl"))):
        row = _replayed(bank, given, model, tmp_path / f"one_{given.suffix}", "--seed", "3",
                        *design)
        _same(persons, asked, model, row)


def test_a_generation_task_replayed_from_logs_equals_simulate(tmp_path):
    """Generations scored by exact match (answered through the requests with the right or a
    wrong generation): the adaptive test live on the logs is simulate's."""
    generation_logs(tmp_path / "logs", n_models=25, n_items=30, seed=1)
    held = tmp_path / "held"
    held.mkdir()
    for m in (3, 12, 21):
        shutil.move(str(tmp_path / "logs" / f"org__gen-{m:02d}"), str(held))
    assert _main(["build-bank", tmp_path / "logs", "-o", tmp_path / "bank", "-q"]) == 0
    persons, asked = _simulate(tmp_path / "bank", held, tmp_path / "sim", "--seed", "2",
                               "--max-items", "12")
    for model in ("org/gen-03", "org/gen-21"):
        row = _replayed(tmp_path / "bank", held, model, tmp_path / model[4:], "--seed", "2",
                        "--max-items", "12")
        assert row["items"] and row["prediction"]["score"] == row["prediction"]["score"]
        _same(persons, asked, model, row)


def _rouge_logs(root: Path, n_models: int, seed: int = 0) -> Path:
    """lm-eval 0.4 generation logs scored by ``rougeL_max`` in points (0-100), a metric atlas
    does not compute: such a folder is replayed by item id, on the metric's scale."""
    rng = np.random.default_rng(seed)
    for m in range(n_models):
        folder = root / f"org__rg-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(40):
            score = float(np.clip(rng.normal(20 + 60 * m / n_models - i, 15), 0, 100))
            args = {"gen_args_0": {"arg_0": f"Summarise {i}:",
                                   "arg_1": {"until": ["\n"], "max_gen_toks": 64}}}
            lines.append(json.dumps({
                "doc_id": i, "doc": {"q": i}, "target": f"gold {i}", "arguments": args,
                "resps": [[f" text {i}"]], "filtered_resps": [f" text {i}"], "filter": "none",
                "metrics": ["rougeL_max"], "rougeL_max": round(score, 2)}))
        (folder / "samples_toysum_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_a_rouge_folder_replays_logs_by_id_on_the_metrics_scale(tmp_path):
    """ROUGE in points, asked by item id: the live replay of the logs reads them on the
    folder's scale as simulate does (the same items and score, in points), and each stored
    reply shows the logged score."""
    root = _rouge_logs(tmp_path / "logs", 26)
    held = tmp_path / "held"
    held.mkdir()
    for m in (5, 20):
        shutil.move(str(root / f"org__rg-{m:02d}"), str(held))
    assert _main(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    persons, asked = _simulate(tmp_path / "bank", held, tmp_path / "sim", "--seed", "1")
    assert persons["score"].max() > 1                          # ROUGE points, as logged
    for model in persons.index:
        row = _replayed(tmp_path / "bank", held, model, tmp_path / model[4:], "--seed", "1")
        _same(persons, asked, model, row)


def test_a_run_replaying_logs_resumes_from_the_logs(mc2_folder, tmp_path):
    """A run stopped half-way is resumed with its subject rebuilt from the stored description
    (the logs' path): they are read again against the folder, and the run ends where the
    uninterrupted one does."""
    from atlascat.catalogue import BankRef
    from atlascat.errors import RunStoppedError
    from atlascat.live.service import LiveRun, resume
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import SubjectError, SubjectSpec

    ref = BankRef.from_option(str(mc2_folder / "bank"))
    spec = SubjectSpec.parse(f"replay:{mc2_folder / 'logs_held_out'}#simulated/model-12")
    bank = ref.load()

    class Flaky:
        def __init__(self, inner):
            self.inner, self.calls = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def loglikelihood(self, requests):
            self.calls += 1
            if self.calls == 8:
                raise SubjectError("the server died")
            return self.inner.loglikelihood(requests)

    def start_run(db, subject, **kw):   # the store it opens closed after it
        with LiveRun.start(str(db), ref, [subject], seed=3, design="adaptive") as live:
            return live.run(**kw)

    whole = start_run(tmp_path / "whole.sqlite", spec.build(bank, folder=ref.folder()))[0]
    flaky = Flaky(spec.build(bank, folder=ref.folder()))
    with pytest.raises(RunStoppedError) as stop:
        start_run(tmp_path / "part.sqlite", flaky, raise_errors=True)
    store = RunStore(str(tmp_path / "part.sqlite"))
    assert 0 < store.get_run(stop.value.run_id)["n_items"] < len(whole.items)
    assert store.get_run(stop.value.run_id)["subject"]["matrix"] == str(
        mc2_folder / "logs_held_out")
    done = resume(str(tmp_path / "part.sqlite"), stop.value.run_id)
    assert done.items == whole.items and done.theta == pytest.approx(whole.theta, abs=1e-12)


def _one_line(capsys, argv, *needles):
    rc = _main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, err)
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_bad_logs_to_replay_are_one_line(mc2_folder, shared_data, tmp_path, capsys):
    """A model the logs do not hold (its models named), logs of another task, logs given to
    a folder built from a response matrix or to a bank that is no folder: one line, exit 2,
    from evaluate (and from simulate where it reads logs too)."""
    from atlascat.bankdir import read_sample_logs, simulated_sample_logs

    bank, logs = mc2_folder / "bank", mc2_folder / "logs_held_out"
    ev = ["evaluate", "-q", "--db", tmp_path / "r.sqlite", "--subject"]
    _one_line(capsys, [*ev, f"replay:{logs}#simulated/model-99", "--bank", bank],
              "'simulated/model-99' is not a subject", "simulated/model-12")
    _one_line(capsys, [*ev, f"replay:{logs}#simulated__model-1", "--bank", bank],
              "did you mean simulated/model-12")
    wino = sorted((shared_data / "lmeval_samples" / "pythia-14m").glob(
        "samples_metabench_winogrande_secondary_*.jsonl.gz"))[0]
    simulated_sample_logs(wino, tmp_path / "wino", n_models=2, seed=0)
    for cmd in ([*ev, f"replay:{tmp_path / 'wino'}#simulated/model-01"],
                ["simulate", tmp_path / "wino", "-q", "-o", tmp_path / "s1"]):
        _one_line(capsys, [*cmd, "--bank", bank], "metabench_winogrande_secondary",
                  "built from logs of 'metabench_truthfulqa_secondary'")
    read_sample_logs(mc2_folder / "logs", metric="mc2").write(tmp_path / "src.csv")
    assert _main(["build-bank", tmp_path / "src.csv", "-q", "-o", tmp_path / "mbank"]) == 0
    capsys.readouterr()                                    # the build's warnings
    for cmd in ([*ev, f"replay:{logs}#simulated/model-12"],
                ["simulate", logs, "-q", "-o", tmp_path / "s2"]):
        _one_line(capsys, [*cmd, "--bank", tmp_path / "mbank"], "names sample logs",
                  "built from a response matrix")
    _one_line(capsys, [*ev, f"replay:{logs}#simulated/model-12", "--bank", "arc"],
              "names sample logs", "--bank DIR")
