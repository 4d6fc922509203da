"""``atlas items [RESPONSES] --bank BANK [--groups G --summary S]``: item quality report (flags,
information share, S-X2; a multiple-group bank's under the groups' priors)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import (GROUPS_HELP, SUMMARY_HELP, bank_option_help, console, json_safe, output_file,
                      print_frame)


_GROUPS = typer.Option(None, "--groups", metavar="FILE", help=GROUPS_HELP + " S-X2 within each "
                       "group under its prior, summed per item on the summed df (mirt's "
                       "itemfit per group); information over the groups' priors.")
_SUMMARY = typer.Option(None, "--summary", metavar="FILE", help=SUMMARY_HELP)


def register(app: typer.Typer) -> None:
    @app.command("items")
    def items(
        responses: Optional[str] = typer.Argument(
            None, metavar="RESPONSES",
            help="Responses for the S-X2 item fit (0/1, complete rows; ratings for an "
                 "ordinal bank; file or bundled name)."),
        bank: Optional[str] = typer.Option(None, "--bank", "-b", help=bank_option_help()),
        output: Path = typer.Option(None, "--output", "-o", help="Write the full report (CSV)."),
        as_json: bool = typer.Option(False, "--json", help="Print counts and flagged items as JSON."),
        show_all: bool = typer.Option(False, "--all", help="List every item, not only flagged ones."),
        freq_column: str = typer.Option(None, "--freq-column", help="Pattern frequency column."),
        normalize_ids: bool = typer.Option(False, "--normalize-ids", help="X514 -> 514 item ids."),
        estimated: str = typer.Option(None, "--estimated",
                                      help="S-X2 df: parameters estimated from these responses "
                                           "(none, rasch, 1pl, 2pl, 3pl or 4pl; an ordinal bank's: all or "
                                           "none) [default: the bank's model]."),
        a_min: float = typer.Option(0.2, "--a-min", help="Flag 0 <= a below this (low_a)."),
        c_max: float = typer.Option(0.5, "--c-max", help="Flag c at or above this (high_c)."),
        c_warn: float = typer.Option(0.4, "--c-warn", help="Flag c at or above this (c_near_max)."),
        b_max: float = typer.Option(4.0, "--b-max", help="Flag |b| above this (extreme_b)."),
        u_min: float = typer.Option(0.9, "--u-min", help="Flag u below this (low_u)."),
        alpha: float = typer.Option(0.01, "--alpha",
                                    help="Flag S-X2 p below this after Benjamini-Hochberg."),
        groups: Path = _GROUPS,
        summary: Path = _SUMMARY,
    ):
        """Item quality report: flawed items and each item's share of the test information.

        Flags negative or near-zero discrimination, guessing near or above 0.5, extreme
        difficulty, low upper asymptote, and (with RESPONSES) poor S-X2 fit; the information
        share shows how much weight an item gets in theta, versus 1/n in raw accuracy.
        A multiple-group bank (--groups with --summary): each group's S-X2 under its prior,
        combined per item (the sum on the summed df, flagged as one group's; worst_group the
        group with the smallest p). An ordinal (graded / gpcm) bank: RESPONSES are ratings on
        the items' own scales, their S-X2 mirt's itemfit.
        """
        from ..studies.item_quality import FLAGS, item_quality
        from ..catalogue import BankRef
        from ..bankdir.predict import read_answers
        from ._common import align_items, check_grouped_bank, group_priors_option

        from ..errors import ConfigError

        if bank is None:
            raise ConfigError("give the bank with --bank BANK (file or bundled name); RESPONSES "
                              "(positional) are the answers for the S-X2 item fit")
        output_file(output, inputs={"RESPONSES": responses, "--bank": bank, "--groups": groups,
                                    "--summary": summary})
        grouping = group_priors_option(groups, summary) or {}
        if grouping and responses is None:
            raise ConfigError("--groups: give RESPONSES, the answers each group's item fit "
                              "(S-X2) and its share of the subjects come from")
        bk = (ref := BankRef.from_option(bank, normalize_ids=normalize_ids)).load()
        check_grouped_bank(bk, grouping, "the information share" + (
            "" if responses is None else " and S-X2") + " computed")
        rm = None
        if responses is not None and _is_ordinal(bk):     # ratings on the items' own scales
            rm, bk = _ordinal_ratings(responses, bk, freq_column, normalize_ids)
        elif responses is not None:
            rm = read_answers(responses, ref, freq_column=freq_column, normalize_ids=normalize_ids)
            rm, bk = align_items(rm, bk, "ignore", restrict_bank=True)
        q = item_quality(bk, rm, a_min=a_min, c_warn=c_warn, c_max=c_max, u_min=u_min,
                         b_max=b_max, alpha=alpha,
                         estimated=None if estimated is None else estimated.lower(), **grouping)
        counts = {f: int(q["issues"].str.split(",").apply(lambda xs, f=f: f in xs).sum())
                  for f in FLAGS}
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            q.to_csv(output, index=False, float_format="%.8g")
        flagged = q[q["n_issues"] > 0]
        if as_json:
            out = {"n_items": int(len(q)), "n_flagged": int(len(flagged)), "counts": counts,
                   "flagged": flagged[[c for c in _SHOWN + ["worst_group", "issues"]
                                       if c in q.columns]
                                      ].to_dict(orient="records")}
            console.print_json(json.dumps(json_safe(out)))
            return
        _print_report(q, flagged, counts, show_all, output)


def _print_report(q, flagged, counts: dict, show_all: bool, output) -> None:
    """The counts line, the flagged (or, with --all, every) item's row, the weight ratios."""
    import pandas as pd

    console.print(f"[bold]{len(q)} items[/], {len(flagged)} flagged: "
                  + ", ".join(f"{k} {v}" for k, v in counts.items() if v) if len(flagged)
                  else f"[bold]{len(q)} items[/], none flagged"
                  + ("" if show_all else " (--all lists them)"))
    if not (len(flagged) or show_all):   # no empty table
        return console.print(f"wrote {output}") if output is not None else None
    shown = q if show_all else flagged.sort_values(["n_issues", "info_share"],
                                                   ascending=[False, True])
    cols = [c for c in _SHOWN + ["weight_ratio"] if c in q.columns]
    if "p_S_X2" in q.columns:
        cols += ["S_X2", "p_S_X2"] + (["worst_group"] if "worst_group" in q.columns else [])
    cols.append("issues")
    print_frame(pd.DataFrame(shown[cols]), title="item quality")
    clean = q[q["n_issues"] == 0]
    if len(flagged) and len(clean):
        console.print(f"median weight ratio (information share x n): flagged "
                      f"{flagged['weight_ratio'].median():.3f}, others "
                      f"{clean['weight_ratio'].median():.3f}")
    if output is not None:
        console.print(f"wrote {output}")


def _is_ordinal(bank) -> bool:
    from ..irt.polybank import PolyBank

    return isinstance(bank, PolyBank)


def _ordinal_ratings(responses, bank, freq_column, normalize_ids: bool):
    """The ratings of an ordinal bank's items (a subjects x items frame on the items' own
    scales) and the bank restricted to the items rated."""
    import pandas as pd

    from ..errors import ConfigError
    from ..irt.polycal import read_ratings

    values, sids, iids, weights = read_ratings(responses, freq_column=freq_column)
    if weights is not None:
        raise ConfigError("--freq-column: an ordinal bank's item report takes one row per "
                          "subject, not pattern frequencies")
    if normalize_ids:
        from ..validation import normalize_item_id

        iids = [normalize_item_id(i) for i in iids]
    frame = pd.DataFrame(values, index=[str(s) for s in sids], columns=[str(i) for i in iids])
    rated = [i for i in frame.columns if i in bank]
    if not rated:
        raise ConfigError(f"none of the {len(iids)} rated items is in the bank (ratings: "
                          f"{list(frame.columns[:3])}, bank: {list(bank.item_ids[:3])})")
    return frame[rated], bank.subset(rated)


#: the columns shown of a binary bank's report (a, b, c, u) or an ordinal one's (model,
#: categories, a, location)
_SHOWN = ["item_id", "model", "n_categories", "a", "b", "c", "u", "location", "info_share"]
