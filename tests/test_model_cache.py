"""The converted-model cache (``atlascat.live.model_cache``) and ``hf:``'s use of it, without
torch: the cache key, the manifest check and the write-then-rename, and ``_cached_gguf`` with a
stand-in for ``transformers`` (the real model's cache load is in tests/test_real_model.py)."""
from __future__ import annotations

import hashlib
import json
import types
from pathlib import Path

import pytest

from atlascat.live import hf as hf_mod
from atlascat.live.model_cache import (MANIFEST, cache_root, file_sha256, gguf_cache_dir,
                                       valid_folder, write_folder)


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_cache_root_follows_the_environment(tmp_path):
    assert cache_root({"ATLAS_CACHE_DIR": str(tmp_path), "XDG_CACHE_HOME": "/x"}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "atlascat"
    assert cache_root({}) == Path.home() / ".cache" / "atlascat"


def test_the_key_is_the_file_content(tmp_path):
    a = tmp_path / "My Model.Q4_1.gguf"
    a.write_bytes(b"GGUF" + b"\x01" * 1000)
    digest = hashlib.sha256(a.read_bytes()).hexdigest()
    assert file_sha256(a, chunk=7) == digest            # read in blocks: the same digest
    folder, key = gguf_cache_dir(a, tmp_path / "c")
    assert folder == tmp_path / "c" / "models" / f"My_Model.Q4_1-{digest[:16]}"
    assert key == {"format": 1, "sha256": digest, "size": 1004}
    b = tmp_path / "sub" / "My Model.Q4_1.gguf"        # a copy elsewhere: the same folder
    b.parent.mkdir()
    b.write_bytes(a.read_bytes())
    assert gguf_cache_dir(b, tmp_path / "c") == (folder, key)
    a.write_bytes(b"GGUF" + b"\x02" * 1000)             # changed content: another folder
    folder2, key2 = gguf_cache_dir(a, tmp_path / "c")
    assert folder2 != folder and key2["sha256"] != digest


def _writer(tmp: Path) -> None:
    (tmp / "model.safetensors").write_bytes(b"w" * 100)
    (tmp / "config.json").write_text("{}")


def test_write_folder_renames_a_complete_folder_into_place(tmp_path):
    key = {"format": 1, "sha256": "ab" * 32, "size": 5}
    dest = tmp_path / "models" / "m-abab"
    assert not valid_folder(dest, key)
    assert write_folder(dest, key, _writer) == dest
    assert _files(dest) == [MANIFEST, "config.json", "model.safetensors"]
    meta = json.loads((dest / MANIFEST).read_text())
    assert meta["files"] == {"config.json": 2, "model.safetensors": 100}
    assert valid_folder(dest, key)
    assert _files(dest.parent) == ["m-abab"]            # no temporary folder left
    assert not valid_folder(dest, {**key, "sha256": "cd" * 32})   # another file's folder


def test_an_incomplete_folder_is_not_used_and_is_replaced(tmp_path):
    key = {"format": 1, "sha256": "ab" * 32, "size": 5}
    dest = tmp_path / "m"
    write_folder(dest, key, _writer)
    (dest / "model.safetensors").write_bytes(b"w" * 99)        # truncated
    assert not valid_folder(dest, key)
    write_folder(dest, key, _writer)
    assert valid_folder(dest, key) and (dest / "model.safetensors").stat().st_size == 100
    (dest / "config.json").unlink()                             # a file missing
    assert not valid_folder(dest, key)
    write_folder(dest, key, _writer)
    (dest / MANIFEST).write_text("{not json")                    # a broken manifest
    assert not valid_folder(dest, key)
    (dest / MANIFEST).unlink()                                   # no manifest (cut short)
    assert not valid_folder(dest, key)
    write_folder(dest, key, _writer)
    assert valid_folder(dest, key)
    assert _files(tmp_path) == ["m"]


def test_a_failed_write_leaves_nothing(tmp_path):
    key = {"format": 1, "sha256": "ab" * 32, "size": 5}
    dest = tmp_path / "m"

    def broken(tmp: Path) -> None:
        (tmp / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError, match="conversion failed"):
        write_folder(dest, key, broken)
    with pytest.raises(OSError, match="nothing was written"):
        write_folder(dest, key, lambda tmp: None)
    assert _files(tmp_path) == []


def test_a_valid_folder_already_there_is_kept(tmp_path):
    key = {"format": 1, "sha256": "ab" * 32, "size": 5}
    dest = tmp_path / "m"
    write_folder(dest, key, _writer)
    write_folder(dest, key, lambda tmp: (tmp / "other.bin").write_bytes(b"x"))
    assert _files(dest) == [MANIFEST, "config.json", "model.safetensors"]
    assert _files(tmp_path) == ["m"]


class _FakeModel:
    """Saves one file; refuses, as transformers does, while the GGUF quantizer is attached."""

    def __init__(self):
        self.config = types.SimpleNamespace(quantization_config={"quant_method": "gguf"})
        self.hf_quantizer = object()

    def save_pretrained(self, dest: Path) -> None:
        if self.hf_quantizer is not None or hasattr(self.config, "quantization_config"):
            raise ValueError("a quantized model cannot be saved")
        (dest / "model.safetensors").write_bytes(b"weights")


class _FakeTransformers:
    """Records ``from_pretrained`` calls of a model and a tokenizer that save one file each."""
    __version__ = "5.17.0"

    def __init__(self):
        self.calls = []
        calls = self.calls

        class AutoModelForCausalLM:
            @staticmethod
            def from_pretrained(source, **kw):
                calls.append(("model", source, kw))
                return _FakeModel()

        class AutoTokenizer:
            @staticmethod
            def from_pretrained(source, **kw):
                calls.append(("tokenizer", source, kw))
                return types.SimpleNamespace(
                    save_pretrained=lambda d: (d / "tokenizer.json").write_text("{}"))

        self.AutoModelForCausalLM, self.AutoTokenizer = AutoModelForCausalLM, AutoTokenizer


def test_hf_converts_a_gguf_file_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" * 10)
    tf = _FakeTransformers()
    kw = {"revision": None, "gguf_file": "m.gguf"}
    folder = hf_mod._cached_gguf(tf, (str(tmp_path), "m.gguf"), kw)
    want, key = gguf_cache_dir(gguf)
    assert folder == str(want) and valid_folder(folder, key)
    assert tf.calls == [("model", str(tmp_path), {"dtype": "float32", **kw}),
                        ("tokenizer", str(tmp_path), kw)]
    assert _files(Path(folder)) == [MANIFEST, "model.safetensors", "tokenizer.json"]
    assert hf_mod._cached_gguf(tf, (str(tmp_path), "m.gguf"), kw) == folder
    assert len(tf.calls) == 2                           # the second load converts nothing
    gguf.write_bytes(b"GGUF" * 11)                      # a new file: converted again
    assert hf_mod._cached_gguf(tf, (str(tmp_path), "m.gguf"), kw) != folder
    assert len(tf.calls) == 4
    # a Hub repository's GGUF file is left to transformers
    assert hf_mod._cached_gguf(tf, ("org/repo-GGUF", "m.gguf"), kw) is None


def test_hf_reads_the_gguf_file_when_the_cache_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(blocker))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.warns(UserWarning, match="cannot be written.*reading the GGUF file itself"):
        assert hf_mod._cached_gguf(_FakeTransformers(), (str(tmp_path), "m.gguf"), {}) is None


def test_hf_spec_takes_model_cache(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(hf_mod, "HFSubject", lambda model, **kw: seen.append((model, kw)))
    hf_mod.hf_subject_from_spec(f"{tmp_path / 'm.gguf'},model_cache=false")
    assert seen == [(str(tmp_path / "m.gguf"), {"model_cache": False})]
