"""The converted-model cache: a GGUF file parsed once, its weights kept as a safetensors folder.

transformers reads a GGUF file in Python and de-quantizes every tensor on every load (about 20 s
for SmolLM2-135M's 98 MB Q4_1 file); the same weights saved by ``save_pretrained`` load in about
a second. ``hf:FILE.gguf`` (:class:`atlascat.live.hf.HFSubject`) therefore converts a local GGUF
file once into

    <root>/models/<file stem>-<first 16 hex digits of the file's SHA-256>/

where ``<root>`` is ``$ATLAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/atlascat``, else
``~/.cache/atlascat``. The key is the file's content (a changed file gets a new folder). The
folder holds the de-quantized weights in float32 (GGUF de-quantization yields float32, so the copy is exact whatever dtype a run
asks for: the run casts it as it would cast the GGUF tensors), the config, the tokenizer and a
manifest (:data:`MANIFEST`) written last, naming every file with its size.

A folder is used only when its manifest is there, matches the key and lists files that are all
there at their recorded sizes. It is written into a temporary sibling folder and renamed into
place, so a run cut short leaves no folder that looks complete; a folder that fails the check
is replaced. Needs no torch.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Mapping

__all__ = ["MANIFEST", "cache_root", "file_sha256", "gguf_cache_dir", "valid_folder",
           "write_folder"]

#: the manifest file, written last into a cache folder
MANIFEST = "atlas-cache.json"
_FORMAT = 1


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """``$ATLAS_CACHE_DIR``, else ``$XDG_CACHE_HOME/atlascat``, else ``~/.cache/atlascat``."""
    env = os.environ if env is None else env
    if env.get("ATLAS_CACHE_DIR"):
        return Path(env["ATLAS_CACHE_DIR"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "atlascat"
    return Path("~/.cache/atlascat").expanduser()


def file_sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def gguf_cache_dir(path: str | Path, root: str | Path | None = None,
                   sha256: str | None = None) -> tuple[Path, dict]:
    """``(folder, key)`` of the GGUF file ``path``: the folder under ``root/models`` named
    ``<stem>-<sha256[:16]>`` and the key a valid folder's manifest must hold (format, SHA-256
    and size of the file)."""
    path = Path(path)
    digest = sha256 or file_sha256(path)
    stem = "".join(c if c.isalnum() or c in "._-" else "_" for c in path.stem) or "model"
    base = Path(root) if root is not None else cache_root()
    key = {"format": _FORMAT, "sha256": digest, "size": path.stat().st_size}
    return base / "models" / f"{stem}-{digest[:16]}", key


def _listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def valid_folder(folder: str | Path, key: Mapping) -> bool:
    """Whether ``folder`` holds a complete cache entry for ``key``: its manifest is there,
    holds ``key`` and lists at least one file, and every listed file is there at its size."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or any(meta.get(k) != v for k, v in key.items()):
        return False
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        return False
    for name, size in files.items():
        p = folder / name
        if not p.is_file() or p.stat().st_size != size:
            return False
    return True


def write_folder(folder: str | Path, key: Mapping, writer: Callable[[Path], None]) -> Path:
    """Fill ``folder`` by ``writer(tmp)`` in a temporary sibling, add the manifest (``key``
    and every file with its size), then rename it into place. A valid folder already there
    (another process was faster) is kept and the new copy dropped; an invalid one is replaced.
    On any error the temporary folder is removed and the error raised."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)   # mkdtemp's 0700 would hide the folder from other users
    try:
        writer(tmp)
        files = _listing(tmp)
        if not files:
            raise OSError(f"nothing was written into the cache folder {str(folder)!r}")
        meta = {**key, "files": files}
        (tmp / MANIFEST).write_text(json.dumps(meta, indent=1, sort_keys=True))
        if folder.exists():
            if valid_folder(folder, key):
                shutil.rmtree(tmp, ignore_errors=True)
                return folder
            stale = Path(tempfile.mkdtemp(prefix=f".{folder.name}.stale-", dir=folder.parent))
            os.replace(folder, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:   # another process renamed its copy in first
            if not valid_folder(folder, key):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder
