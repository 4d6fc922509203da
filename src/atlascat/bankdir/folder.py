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
    DIR/source_answers.npz the source models' answers to the bank's items and their scores
                          (:class:`SourceAnswers`; folders built by earlier versions lack it):
                          what a fixed form's precision is cross-fitted on
    DIR/<other files>     optional extras (e.g. ``predictor.json``), listed in
                          :attr:`BankFolder.extras` by name, read by whoever owns them

:func:`load_bank_dir` reads it into a :class:`BankFolder`; :func:`is_bank_dir` says whether a
path is one (a folder holding ``manifest.json``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..content.items import normalize_loaded
from ..errors import BankError, BankFolderError
from ..irt.bank import ItemBank
from ..scorelink.score_link import ScoreLink
from .defaults import SOURCE_ANSWERS_FILE

__all__ = ["BankFolder", "load_bank_dir", "is_bank_dir", "write_bank_dir", "check_bank_dir_output",
           "MANIFEST", "BANK_FILE", "LINK_FILE", "REQUESTS_FILE", "MANIFEST_VERSION",
           "SourceAnswers"]

MANIFEST = "manifest.json"
BANK_FILE = "bank.parquet"
LINK_FILE = "link.json"
REQUESTS_FILE = "requests.jsonl"
MANIFEST_VERSION = 1
_OWN = {MANIFEST, BANK_FILE, LINK_FILE, REQUESTS_FILE, SOURCE_ANSWERS_FILE}


@dataclass
class BankFolder:
    """A loaded bank folder: the bank, its score link, the logged requests (or None), the
    manifest, the folder's other files by name (``extras``, e.g. ``predictor.json``) and its
    source answers (``source``: a :class:`SourceAnswers`, its file until
    :meth:`source_answers` reads it, or None for a folder built before they were kept)."""

    path: Path
    bank: ItemBank
    link: ScoreLink
    manifest: dict
    requests: list | None = None
    extras: dict = field(default_factory=dict)
    source: SourceAnswers | Path | None = None

    def source_answers(self) -> SourceAnswers | None:
        """The source models' answers and scores the folder was built from, or None."""
        if isinstance(self.source, Path):
            self.source = SourceAnswers.read(self.source)
        return self.source

    @property
    def benchmark(self) -> str:
        return str(self.manifest.get("benchmark") or self.link.benchmark or self.path.name)

    def extra(self, name: str) -> Path | None:
        """The path of the optional file ``name`` in the folder, or None."""
        return self.extras.get(name)

    def __repr__(self) -> str:
        """One line: the folder, benchmark, bank, how it was built (with the metric's scale of
        a ``score_range`` folder) and its extra files (the manifest, with its list of every
        source model, stays in ``manifest``)."""
        m = self.manifest
        n_models = m.get("n_models") or len(m.get("models") or ())
        kind = (m.get("source") or {}).get("kind")
        built = f", built from {n_models} models" if n_models else ""
        built += f" ({kind})" if kind and built else ""
        reqs = "" if self.requests is None else f", {len(self.requests)} requests"
        extras = f", extras={sorted(self.extras)}" if self.extras else ""
        scale = (m.get("settings") or {}).get("score_range")
        built += f", scores on {scale[0]:g}-{scale[1]:g}" if scale else ""
        return (f"BankFolder({str(self.path)!r}, benchmark={self.benchmark!r}, "
                f"{self.bank!r}{built}{reqs}{extras})")


@dataclass(frozen=True)
class SourceAnswers:
    """The source models' answers (``values``: models x items, 0-1, NaN where not answered) to
    the bank's items and their scores (0-1, NaN without one), as the build fitted them."""

    models: tuple
    item_ids: tuple
    values: np.ndarray
    scores: np.ndarray

    def write(self, path) -> None:
        np.savez_compressed(path, values=np.asarray(self.values, float),
                            scores=np.asarray(self.scores, float),
                            models=np.asarray(self.models, dtype=str),
                            items=np.asarray(self.item_ids, dtype=str))

    @classmethod
    def read(cls, path) -> "SourceAnswers":
        try:
            with np.load(path, allow_pickle=False) as z:
                values, scores = np.asarray(z["values"], float), np.asarray(z["scores"], float)
                models, items = z["models"].tolist(), z["items"].tolist()
        except (OSError, ValueError, KeyError, EOFError) as exc:   # numpy's words mislead
            raise BankFolderError(f"{str(path)!r} cannot be read as the source answers "
                                  f"({type(exc).__name__})",
                                  path=Path(path).parent) from None
        if values.shape != (len(models), len(items)) or scores.shape != (len(models),):
            raise BankFolderError(f"{str(path)!r} (the source answers): {values.shape} answers "
                                  f"for {len(models)} models x {len(items)} items",
                                  path=Path(path).parent)
        return cls(tuple(models), tuple(items), values, scores)


def is_bank_dir(path) -> bool:
    """Whether ``path`` is a bank folder (a directory with ``manifest.json``)."""
    try:
        p = Path(str(path))
        return p.is_dir() and (p / MANIFEST).is_file()
    except (OSError, ValueError):
        return False


def _read_json(path: Path, what: str):
    """The JSON object in ``path``; anything else (unreadable, not JSON, a list) refused."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BankFolderError(f"{str(path)!r} ({what}) cannot be read ({exc})",
                              path=path.parent) from None
    if not isinstance(obj, dict):
        raise BankFolderError(f"{str(path)!r} ({what}) holds a JSON "
                              f"{_JSON_NAMES.get(type(obj), type(obj).__name__)}, not an object",
                              path=path.parent)
    return obj


# manifest fields that readers use, and the JSON types they must have when present
_MANIFEST_TYPES = {"benchmark": str, "score": str, "source": dict, "settings": dict,
                   "models": list}
_NESTED_TYPES = {("source", "metric"): str, ("settings", "score_range"): list,
                 ("settings", "budget"): int}


def _check_manifest(manifest: dict, path: Path) -> None:
    """Refuse a manifest whose fields have the wrong JSON type (a hand edit), naming the field."""
    fields = [((key,), manifest.get(key), want) for key, want in _MANIFEST_TYPES.items()]
    fields += [(key, (manifest.get(key[0]) if isinstance(manifest.get(key[0]), dict) else {})
                .get(key[1]), want) for key, want in _NESTED_TYPES.items()]
    for key, value, want in fields:
        if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
            raise BankFolderError(f"{str(path)!r} (the manifest): field {'.'.join(key)!r} is "
                                  f"{value!r}, not a JSON {_JSON_NAMES[want]}", path=path.parent)
    rng = (manifest.get("settings") or {}).get("score_range")
    if rng is not None and (len(rng) != 2 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng)):
        raise BankFolderError(f"{str(path)!r} (the manifest): field 'settings.score_range' is "
                              f"{rng!r}, not [low, high]", path=path.parent)


_JSON_NAMES = {str: "string", dict: "object", list: "array", int: "integer", float: "number",
               bool: "boolean", type(None): "null"}


def _read_requests(path: Path) -> list:
    """The logged requests, one JSON object a line; a broken line refused by its number."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise BankFolderError(f"{str(path)!r} line {n} is not JSON ({exc})",
                                      path=path.parent) from None
            if not isinstance(rec, dict):
                raise BankFolderError(f"{str(path)!r} line {n} is not a JSON object",
                                      path=path.parent)
            out.append(rec)
    return out


def load_bank_dir(path) -> BankFolder:
    """Read a bank folder written by :func:`write_bank_dir` (``atlas build-bank``)."""
    p = Path(str(path))
    if not is_bank_dir(p):
        what = "a directory but not a bank folder" if p.is_dir() else "not a bank folder"
        raise BankFolderError(f"{str(p)!r} is {what} (no {MANIFEST})", path=p)
    manifest = _read_json(p / MANIFEST, "the manifest")
    _check_manifest(manifest, p / MANIFEST)
    for name in (BANK_FILE, LINK_FILE):
        if not (p / name).is_file():
            raise BankFolderError(f"bank folder {str(p)!r} has no {name}")
    bank = normalize_loaded(ItemBank.read(p / BANK_FILE))
    link_json = _read_json(p / LINK_FILE, "the score link")
    try:
        link = ScoreLink.from_dict(link_json)
    except BankError as exc:
        raise BankFolderError(f"{str(p / LINK_FILE)!r}: {exc}", path=p) from None
    score_range = (manifest.get("settings") or {}).get("score_range")
    if score_range is not None:  # its notes and warnings on the metric's own scale
        link.info["metric_range"] = [float(v) for v in score_range]
    link.info["population"] = "the source models"   # whom its warnings say it was fitted on
    requests = None
    if (p / REQUESTS_FILE).is_file():
        try:
            requests = _read_requests(p / REQUESTS_FILE)
        except UnicodeDecodeError as exc:
            raise BankFolderError(f"{str(p / REQUESTS_FILE)!r} is not UTF-8 text ({exc})",
                                  path=p) from None
    extras = {q.name: q for q in sorted(p.iterdir()) if q.name not in _OWN}
    source = p / SOURCE_ANSWERS_FILE
    return BankFolder(p, bank, link, manifest, requests, extras,
                      source if source.is_file() else None)


def check_bank_dir_output(path, option: str = "-o/--output") -> Path:
    """A folder a bank folder can be written to: new, or a bank folder (rebuilt in place), or
    one holding none of the files a bank folder writes. A folder that is no bank folder (no
    manifest.json) but holds a bank.parquet, link.json or requests.jsonl of its own would lose
    them: refused, naming them."""
    from ..validation import check_output_dir

    p = check_output_dir(path, option=option, what="bank folder")
    if p.is_dir() and not (p / MANIFEST).is_file():
        mine = sorted(q for q in _OWN if (p / q).exists())
        if mine:
            from ..errors import ConfigError

            raise ConfigError(f"{option} {str(p)!r} is no bank folder (no {MANIFEST}) but holds "
                              f"{', '.join(mine)} of its own, which building there would "
                              "replace; give a new folder")
    return p


def write_bank_dir(path, bank: ItemBank, link: ScoreLink, manifest: dict,
                   requests: list | None = None, source: SourceAnswers | None = None) -> Path:
    """Write a bank folder (see the module docstring); existing extras are left in place
    (a stale ``source_answers.npz`` removed when ``source`` is None)."""
    p = check_bank_dir_output(path, option="folder")
    p.mkdir(parents=True, exist_ok=True)
    bank.to_frame("ours").to_parquet(p / BANK_FILE, index=False, compression="zstd")
    link.write(p / LINK_FILE)
    if requests is not None:
        with open(p / REQUESTS_FILE, "w", encoding="utf-8") as fh:
            for rec in requests:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    elif (p / REQUESTS_FILE).exists():
        (p / REQUESTS_FILE).unlink()
    if source is not None:
        source.write(p / SOURCE_ANSWERS_FILE)
    elif (p / SOURCE_ANSWERS_FILE).exists():
        (p / SOURCE_ANSWERS_FILE).unlink()
    from ..validation import json_safe

    manifest = {"format": "atlas-bank-folder", "version": MANIFEST_VERSION, **manifest}
    (p / MANIFEST).write_text(json.dumps(json_safe(manifest), indent=2, ensure_ascii=False,
                                         allow_nan=False) + "\n", encoding="utf-8")   # strict
    return p
