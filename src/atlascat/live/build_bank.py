"""Rebuild the shipped content bank ``datasets/data/live_arc_bank.parquet``.

    python -m atlascat.live.build_bank --items ../shared/data/openllm/items [--published]

Steps: calibrate a 3PL bank on the dense ARC matrix (``datasets.load_responses('arc')``,
2193 models x 317 items) with our own marginal-ML EM (:func:`atlascat.irt.calibrate.calibrate`,
mirt's settings: 61 nodes on [-6, 6], no priors) after the paper's psychometric filtering
(:func:`atlascat.filtering.filter_items` defaults: item SD >= 0.01, mean <= 0.95, point-biserial
>= 0.1; 185 items kept), keep the items that have content in metabench's ARC item files (158),
attach the content and write Parquet (zstd). ``--published`` uses the ATLAS paper's published
ARC bank instead (245 items with content).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .items import SHIPPED_BANKS, attach_content, load_item_content

__all__ = ["build_content_bank", "write_content_bank"]

#: calibration settings of the shipped bank (recorded in docs/live.md)
CALIBRATION = {"model": "3pl", "filter": True}


def build_content_bank(items_dir, *, bench: str = "arc", published: bool = False, bank=None):
    """A content bank for ``bench``: our calibration of the dense matrix (or ``bank``) + content."""
    from .. import datasets

    if bank is None:
        if published:
            bank = datasets.load_bank(bench)
        else:
            from ..irt.calibrate import calibrate

            result = calibrate(datasets.load_responses(bench), **CALIBRATION)
            if not result.converged:
                raise RuntimeError(f"the {bench} calibration did not converge")
            bank = result.bank
    content = load_item_content(bench, items_dir)
    return attach_content(bank, content, missing="drop")


def write_content_bank(bank, path) -> Path:
    """Write a content bank as zstd Parquet (list columns stay lists)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bank.to_frame("ours").to_parquet(path, index=False, compression="zstd")
    return path


def main(argv=None) -> None:  # pragma: no cover - maintenance script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True, help="folder with <bench>.parquet item files")
    parser.add_argument("--bench", default="arc")
    parser.add_argument("--published", action="store_true",
                        help="use the paper's published bank instead of our calibration")
    parser.add_argument("--out", default=None, help="output path (default: the shipped file)")
    args = parser.parse_args(argv)
    bank = build_content_bank(args.items, bench=args.bench, published=args.published)
    out = args.out or Path(__file__).resolve().parents[1] / "datasets" / "data" / SHIPPED_BANKS[args.bench]
    write_content_bank(bank, out)
    print(f"wrote {len(bank)} items to {out} ({Path(out).stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":  # pragma: no cover
    main()
