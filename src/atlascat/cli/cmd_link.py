"""``atlas link REF NEW -o OUT``: put a bank on the scale of another through common anchor items."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..irt.defaults import DRIFT_MIN, DRIFT_Z, QUADPTS
from ._common import console, escape, json_safe, output_file


def _read_anchors(path: Path) -> list[str]:
    """Anchor ids: one per line (``#`` comments allowed), or a CSV with an ``item_id`` column."""
    import pandas as pd

    from ..errors import ConfigError
    from ..validation import check_input_file

    path = check_input_file(path, what="anchor file", option="--anchors", error=ConfigError)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"anchor file {str(path)!r} is not UTF-8 text (offset {exc.start}); "
                          "re-save it as UTF-8") from None
    first = text.splitlines()[0].strip() if text.strip() else ""
    if "," in first:
        df = pd.read_csv(path, dtype=str)
        if "item_id" not in df.columns:
            raise ConfigError(f"anchor file {str(path)!r} is a CSV without an 'item_id' column")
        return df["item_id"].dropna().str.strip().tolist()
    ids = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if ids and ids[0] == "item_id":
        ids = ids[1:]
    return ids


def register(app: typer.Typer) -> None:
    @app.command("link")
    def link_cmd(
        ref: str = typer.Argument(..., metavar="REF",
                                  help="Reference bank (target scale): file or bundled name."),
        new: str = typer.Argument(..., metavar="NEW",
                                  help="Bank to move onto REF's scale: file or bundled name."),
        output: Path = typer.Option(..., "-o", "--output", help="Linked bank to write."),
        method: str = typer.Option("stocking-lord", "--method",
                                   help="Linking method: stocking-lord, haebara, mean-sigma or "
                                        "mean-mean."),
        anchors: Optional[Path] = typer.Option(None, "--anchors",
                                               help="File of anchor item ids (one per line, or a "
                                                    "CSV with item_id) [default: all items the "
                                                    "banks share]."),
        merge: bool = typer.Option(False, "--merge",
                                   help="Write REF plus NEW's non-anchor items (linked) as one bank."),
        quadpts: int = typer.Option(QUADPTS, "--quadpts", help="Grid nodes on [-4, 4] (characteristic curves)."),
        normalize_ids: bool = typer.Option(False, "--normalize-ids", help="Strip R's 'X' from ids."),
        fmt: str = typer.Option("ours", "--format", help="Output format: ours (a,b,c,u) or mirt (a1,d,g,u)."),
        as_json: bool = typer.Option(False, "--json", help="Print the constants as JSON."),
        drift_z: float = typer.Option(DRIFT_Z, "--drift-z",
                                      help="Flag an anchor whose curve gap after linking has "
                                           "|robust z| above this, up to 20 anchors, more "
                                           "beyond (drift)..."),
        drift_min: float = typer.Option(DRIFT_MIN, "--drift-min",
                                        help="... and whose b strays more than this from the median gap."),
        drop_drift: bool = typer.Option(False, "--drop-drift",
                                        help="Link again without the anchors flagged for drift."),
    ):
        """Link NEW to REF through common items: theta_ref = A theta_new + B.

        Writes NEW on REF's scale (a* = a / A, b* = A b + B), or the merged bank with --merge.
        """
        from ..errors import ConfigError
        from ..irt.linking import link_banks

        if fmt not in ("ours", "mirt"):
            raise ConfigError(f"--format must be 'ours' or 'mirt', not {fmt!r}")
        output_file(output, inputs={"REF": ref, "NEW": new, "--anchors": anchors})
        from ..catalogue import BankRef

        ref_bank = BankRef.from_option(ref, option="REF", normalize_ids=normalize_ids).load()
        new_bank = BankRef.from_option(new, option="NEW", normalize_ids=normalize_ids).load()
        anchor_ids = _read_anchors(anchors) if anchors is not None else None
        if anchor_ids is not None and normalize_ids:   # the anchors spelled as the banks now are
            from ..validation import normalize_item_id

            anchor_ids = [normalize_item_id(i) for i in anchor_ids]
        result = link_banks(ref_bank, new_bank, method, anchors=anchor_ids, quadpts=quadpts,
                            drift_z=drift_z, drift_min=drift_min,
                            drop_drift=drop_drift)
        linked = result.merge(ref_bank, new_bank) if merge else result.transform(new_bank)
        linked.write(output, format=fmt)
        info = {**result.to_dict(), "output": str(output), "n_items_written": len(linked)}
        if as_json:
            console.print_json(json.dumps(json_safe(info)))
            return
        crit = "" if result.criterion is None else f", criterion {result.criterion:.4g}"
        console.print(f"{result.method}: A = {result.A:.6f}, B = {result.B:.6f} "
                      f"({len(result.anchors)} anchors{crit})")
        _print_drift(result, drift_min)
        console.print(f"wrote {escape(str(output))} ({len(linked)} items on the scale of {escape(ref)})")


def _print_drift(result, drift_min: float) -> None:
    """The anchors flagged for drift, largest gap first, and whether they were left out."""
    flagged = result.drift[result.drift["flagged"]] if result.drift is not None else None
    if flagged is None or not len(flagged):
        return
    top = flagged.reindex(flagged["drift_z"].abs().sort_values(ascending=False).index)
    shown = ", ".join(f"{escape(str(i))} (d = {r.d:+.3g})" for i, r in top.head(8).iterrows())
    more = f" and {len(top) - 8} more" if len(top) > 8 else ""
    how = ("left out of these constants" if result.dropped else
           "still in these constants: --drop-drift links without them")
    flips = int(flagged["slope_flips"].sum())
    flip = f" or a slope that changes sign ({flips})" if flips else ""
    console.print(f"drift: {len(top)} of {len(result.drift)} anchors have gaps after linking "
                  f"with |z| > {result.drift['threshold'].iloc[0]:.3g} (curves' gap, "
                  f"or b's over its SE) and b {drift_min:g} from the median gap{flip}: "
                  f"{shown}{more}; {how}", highlight=False)
