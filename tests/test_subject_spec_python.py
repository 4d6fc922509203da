"""``SubjectSpec.build`` from Python as docs/live.md writes it: given the bank reference
(``BankRef``, the folder's path, a ``BankFolder``) it builds the subject ``atlas evaluate``
builds, with the folder's items for the run's design, its dispersions (``simulate:`` on a
folder of continuous scores draws scores) and its scale; it took an ItemBank only, and the
``folder=`` the CLI passes had to be found and given by hand (without it a simulated model
answered a continuous folder's items 0/1 and ``replay:`` of sample logs was refused)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from atlascat.cli import main
from lmeval_logs import f1_logs


@pytest.fixture(scope="module")
def f1_folder(tmp_path_factory):
    """A folder built from f1 generation logs of 30 models on 80 items (it has a predictor)."""
    root = tmp_path_factory.mktemp("f1_python")
    f1_logs(root / "logs", n_items=80)
    assert main(["build-bank", str(root / "logs"), "-o", str(root / "bank"), "-q"]) == 0
    return root


def test_build_on_the_reference_is_the_subject_atlas_evaluate_asks(f1_folder, tmp_path):
    from atlascat.bankdir import load_bank_dir
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SubjectSpec

    bank = str(f1_folder / "bank")
    assert main(["evaluate", "--bank", bank, "--subject", "simulate:0.5", "--seed", "2",
                 "-q", "-o", str(tmp_path / "cli")]) == 0
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())[0]
    assert cli["prediction"]["design"] == "benchmark predictor"   # the folder's predictor

    ref = BankRef.from_option(bank)                     # as docs/live.md writes it
    spec = SubjectSpec.parse("simulate:0.5")
    for given in (ref, bank, load_bank_dir(bank)):
        live = LiveRun.start(tmp_path / f"runs{id(given)}.sqlite", ref, [spec.build(given)],
                             seed=2)
        live.run()
        row = live.results()[0]
        live.close()                                    # the store it opened
        assert row["items"] == cli["items"] and row["scores"] == cli["scores"]
        assert row["prediction"]["score"] == pytest.approx(cli["prediction"]["score"],
                                                           abs=1e-12)
    scores = np.asarray(cli["scores"], float)
    assert ((scores > 0) & (scores < 1)).mean() > 0.5     # drawn scores, not 0/1

    adaptive = spec.build(ref, design="adaptive")         # the design's items: the bank's
    ids = list(ref.load().item_ids)
    assert [json.loads(line)["item_id"] for _, line in adaptive.score_items(ids)] == \
        [str(i) for i in ids]


def test_replay_of_sample_logs_from_python(f1_folder):
    """``replay:LOGS#MODEL`` built on the folder reads the logs as the folder was built; on
    an ItemBank alone it says in one line how to give the folder."""
    from atlascat.catalogue import BankRef
    from atlascat.errors import ConfigError
    from atlascat.live.subjects import SubjectSpec

    bank = str(f1_folder / "bank")
    spec = SubjectSpec.parse(f"replay:{f1_folder / 'logs'}#org/qa-05")
    subject = spec.build(bank)
    item = str(BankRef.from_option(bank).load().item_ids[0])
    assert subject.score_items([item])[0][0] is not None
    with pytest.raises(ConfigError, match=r"SubjectSpec.build\(DIR\), or folder=DIR") as err:
        spec.build(BankRef.from_option(bank).load())
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="design= picks the items of a bank reference"):
        SubjectSpec.parse("simulate:0").build(BankRef.from_option(bank).load(),
                                              design="adaptive")
