"""A bank folder: what ``atlas build-bank`` writes and every ``--bank DIR`` reads.

    DIR/manifest.json     what was built from what: source files, task, harness version, metric,
                          models, items, settings, when (``MANIFEST_VERSION``)
    DIR/bank.parquet      the calibrated items (a, b, c, u) with their request metadata
                          (:data:`atlascat.content.requests.REQUEST_COLUMNS`) when built from
                          sample logs
    DIR/link.json         the score link (:class:`atlascat.scorelink.ScoreLink`): theta + answers ->
                          the benchmark score with a 95% interval
    DIR/requests.jsonl    (sample logs only) one line per bank item: the requests exactly as
                          logged, the scoring rule, gold and the document
    DIR/<other files>     optional extras (e.g. ``predictor.json``), listed in
                          :attr:`BankFolder.extras` by name, read by whoever owns them

:func:`load_bank_dir` reads it into a :class:`BankFolder`; :func:`is_bank_dir` says whether a
path is one (a folder holding ``manifest.json``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..content.items import normalize_loaded
from ..errors import BankFolderError
from ..irt.bank import ItemBank
from ..scorelink.score_link import ScoreLink

__all__ = ["BankFolder", "load_bank_dir", "is_bank_dir", "write_bank_dir", "MANIFEST",
           "BANK_FILE", "LINK_FILE", "REQUESTS_FILE", "MANIFEST_VERSION"]

MANIFEST = "manifest.json"
BANK_FILE = "bank.parquet"
LINK_FILE = "link.json"
REQUESTS_FILE = "requests.jsonl"
MANIFEST_VERSION = 1
_OWN = {MANIFEST, BANK_FILE, LINK_FILE, REQUESTS_FILE}


@dataclass
class BankFolder:
    """A loaded bank folder: the bank, its score link, the logged requests (or None), the
    manifest, and the folder's other files by name (``extras``, e.g. ``predictor.json``)."""

    path: Path
    bank: ItemBank
    link: ScoreLink
    manifest: dict
    requests: list | None = None
    extras: dict = field(default_factory=dict)

    @property
    def benchmark(self) -> str:
        return str(self.manifest.get("benchmark") or self.link.benchmark or self.path.name)

    def extra(self, name: str) -> Path | None:
        """The path of the optional file ``name`` in the folder, or None."""
        return self.extras.get(name)


def is_bank_dir(path) -> bool:
    """Whether ``path`` is a bank folder (a directory with ``manifest.json``)."""
    try:
        p = Path(str(path))
        return p.is_dir() and (p / MANIFEST).is_file()
    except (OSError, ValueError):
        return False


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BankFolderError(f"{what} {str(path)!r} cannot be read ({exc})") from None


def load_bank_dir(path) -> BankFolder:
    """Read a bank folder written by :func:`write_bank_dir` (``atlas build-bank``)."""
    p = Path(str(path))
    if not is_bank_dir(p):
        what = "a directory but not a bank folder" if p.is_dir() else "not a bank folder"
        raise BankFolderError(f"{str(p)!r} is {what} (no {MANIFEST})", path=p)
    manifest = _read_json(p / MANIFEST, "the manifest")
    for name in (BANK_FILE, LINK_FILE):
        if not (p / name).is_file():
            raise BankFolderError(f"bank folder {str(p)!r} has no {name}")
    bank = normalize_loaded(ItemBank.read(p / BANK_FILE))
    link = ScoreLink.read(p / LINK_FILE)
    score_range = (manifest.get("settings") or {}).get("score_range")
    if score_range is not None:  # its notes and warnings on the metric's own scale
        link.info["metric_range"] = [float(v) for v in score_range]
    link.info["population"] = "the source models"   # whom its warnings say it was fitted on
    requests = None
    if (p / REQUESTS_FILE).is_file():
        with open(p / REQUESTS_FILE, encoding="utf-8") as fh:
            requests = [json.loads(line) for line in fh if line.strip()]
    extras = {q.name: q for q in sorted(p.iterdir()) if q.name not in _OWN}
    return BankFolder(p, bank, link, manifest, requests, extras)


def write_bank_dir(path, bank: ItemBank, link: ScoreLink, manifest: dict,
                   requests: list | None = None) -> Path:
    """Write a bank folder (see the module docstring); existing extras are left in place."""
    p = Path(str(path))
    p.mkdir(parents=True, exist_ok=True)
    bank.to_frame("ours").to_parquet(p / BANK_FILE, index=False, compression="zstd")
    link.write(p / LINK_FILE)
    if requests is not None:
        with open(p / REQUESTS_FILE, "w", encoding="utf-8") as fh:
            for rec in requests:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    elif (p / REQUESTS_FILE).exists():
        (p / REQUESTS_FILE).unlink()
    manifest = {"format": "atlas-bank-folder", "version": MANIFEST_VERSION, **manifest}
    (p / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                              encoding="utf-8")
    return p
