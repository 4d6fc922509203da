"""``atlas info PATH``: describe a response matrix or an item bank."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ._common import console, escape, json_safe, output_file


def describe(path: Path, freq_column: str | None = None, rotate: str | None = None) -> dict:
    """Summary of a response matrix or a bank file (detected from its columns);
    ``freq_column``: a pattern table's frequencies (each row stands for that many subjects);
    ``rotate``: a multidimensional bank's rotation (default oblimin, as mirt's summary)."""
    import numpy as np
    import pandas as pd

    from ..catalogue import KINDS, BankRef
    from ..responses import ResponseMatrix
    from ..validation import check_input_file

    p = Path(path)
    if p.is_file() and p.suffix.lower() != ".json":   # a .json file: a suite's definition
        p = check_input_file(p, what="file", option="PATH")
    if p.is_file() and p.suffix.lower() != ".json" and _is_multidim(p):
        return _describe_multidim(p, rotate)
    if rotate is not None:
        from ..errors import ConfigError

        raise ConfigError(f"--rotate rotates the factors of a multidimensional 2PL bank (columns a1, "
                          f"a2, ..., d); {str(path)!r} is not one")
    if not p.is_file() or p.suffix.lower() == ".json" or _looks_like_bank(p):
        ref = BankRef.from_option(path, option="PATH", normalize_ids=False, kinds=KINDS)
        if ref.kind == "suite":   # its members, each on its own theta scale
            from ..suite import load_suite

            return {"kind": "suite", "path": str(path), **load_suite(ref).summary()}
        out = {"kind": "bank", "path": str(path), **ref.load().summary()}
        if ref.kind == "dir":  # a bank folder: what it measures, as its runs name it
            out.update(ref.prediction_words())
        elif ref.kind == "file" and ref.bench:   # a bank file named (atlas calibrate --name)
            out["benchmark"] = ref.bench
        return out
    from ..errors import ResponseDataError

    try:
        rm = ResponseMatrix.read(p, on_empty="keep", freq_column=freq_column)
    except ResponseDataError as exc:   # ratings on their own scale (a judge's 1-10, ...)?
        if freq_column is not None or "--freq-column" in str(exc):
            raise exc from None        # a pattern table's counts are no ratings
        ratings = _describe_ratings(p)
        if ratings is None:
            raise exc from None
        return ratings
    if not rm.observed.any():
        from ..errors import ResponseDataError

        raise ResponseDataError(f"{str(path)!r} holds no response at all (every cell is blank)")
    acc = rm.accuracy
    w = rm.subject_weights()
    keep = ~np.isnan(acc)
    q = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
    observed = rm.observed
    per_subject = observed.sum(1)
    patterns = {} if rm.weights is None else {"patterns": rm.n_subjects}
    return {
        "kind": "responses",
        "path": str(p),
        "subjects": rm.n_subjects if rm.weights is None else _count(float(w.sum())),
        **patterns,
        "items": rm.n_items,
        "missing_fraction": round(rm.missing_fraction, 6),
        "binary": rm.is_binary,
        "mean_score_quantiles": dict(zip(["min", "q05", "q25", "median", "q75", "q95", "max"],
                                       np.quantile(acc[keep], q, weights=w[keep],
                                                   method="inverted_cdf").round(4).tolist())),
        "items_per_subject": {"min": int(per_subject.min()),
                              "median": float(np.quantile(per_subject, 0.5, weights=w,
                                                          method="inverted_cdf")),
                              "max": int(per_subject.max())},
        "subjects_without_response": int((~observed.any(1)).sum()),
        "items_without_response": int((~observed.any(0)).sum()),
        "item_mean_quantiles": dict(zip(["min", "median", "max"],
                                        pd.Series(rm.item_means).quantile([0, .5, 1]).round(4).tolist())),
    }


def _is_multidim(path: Path) -> bool:
    from ..validation import read_frame

    cols = set(read_frame(path, what="file", option="PATH", nrows=0).columns.astype(str))
    return {"a1", "a2", "d"} <= cols


def _describe_multidim(path: Path, rotate: str | None) -> dict:
    """A multidimensional 2PL bank: its factor loadings as mirt's ``summary(mod, rotate=)``."""
    from ..irt.multidim import MultidimBank

    bank = MultidimBank.read(path)
    return {"kind": "multidim_bank", "path": str(path), "n_items": len(bank), "n_dims": bank.n_dims,
            **bank.factor_loadings(rotate or "oblimin").to_dict()}


def _count(total: float) -> int | float:
    """A sum of pattern frequencies: an int when they are whole numbers."""
    return int(total) if total == round(total) else total


def _describe_ratings(path: Path) -> dict | None:
    """Summary of a matrix of integer ratings (what ``atlas calibrate --model graded|gpcm``
    reads), or of scores on another scale than 0-1 (``kind`` "scores": BLEU's 37.2, what
    ``atlas build-bank --score-range LO HI`` reads), or None when the file is neither."""
    import numpy as np
    import pandas as pd

    from ..errors import AtlasError
    from ..irt.polycal import read_ratings

    try:
        values, _, _, _ = read_ratings(path)
    except AtlasError:
        return None
    observed = ~np.isnan(values)
    obs = values[observed]
    if obs.size == 0 or values.shape[0] < 2:
        return None   # not ratings to calibrate (one row: the response reader says why)
    whole = bool(np.all(obs == np.round(obs)))
    q = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
    with np.errstate(invalid="ignore"):
        means = np.nanmean(np.where(observed, values, np.nan), axis=1)
        item_means = np.nanmean(np.where(observed, values, np.nan), axis=0)
    per_item = [np.unique(values[observed[:, j], j]).size for j in range(values.shape[1])]
    return {
        "kind": "ratings" if whole else "scores",
        "path": str(path),
        "subjects": int(values.shape[0]),
        "items": int(values.shape[1]),
        "missing_fraction": round(float(1 - observed.mean()), 6),
        **({"levels": [float(v) for v in np.unique(obs)],
            "levels_per_item": {"min": int(min(per_item)), "max": int(max(per_item))}}
           if whole else {"range": [float(obs.min()), float(obs.max())]}),
        f"mean_{'rating' if whole else 'score'}_quantiles": dict(zip(
            ["min", "q05", "q25", "median", "q75", "q95", "max"],
            np.quantile(means[~np.isnan(means)], q).round(4).tolist())),
        "items_per_subject": {"min": int(observed.sum(1).min()),
                              "median": float(np.median(observed.sum(1))),
                              "max": int(observed.sum(1).max())},
        "subjects_without_response": int((~observed.any(1)).sum()),
        "items_without_response": int((~observed.any(0)).sum()),
        "item_mean_quantiles": dict(zip(["min", "median", "max"],
                                        pd.Series(item_means).quantile([0, .5, 1])
                                        .round(4).tolist())),
    }


def _looks_like_bank(path: Path) -> bool:
    from ..irt.polybank import is_poly_bank_file
    from ..validation import read_frame

    if is_poly_bank_file(path):   # graded / gpcm items: a1, d1.., levels
        return True

    cols = set(read_frame(path, what="file", option="PATH", nrows=0).columns.astype(str))
    return {"a1", "d"} <= cols or {"a", "b"} <= cols


def register(app: typer.Typer) -> None:
    @app.command("info")
    def info(path: str = typer.Argument(..., metavar="PATH",
                                        help="Response matrix (CSV/CSV.GZ/Parquet), item bank file, "
                                             "bank folder (atlas build-bank) or a bundled bank "
                                             "name (arc, paper-arc, ...)."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
             theta: str = typer.Option(None, "--theta", metavar="T1,T2,..",
                                       help="A bank: its test information and the ML SE "
                                            "1/sqrt(I) at these abilities, with the most "
                                            "informative items (mirt's testinfo)."),
             item_information: Path = typer.Option(None, "--item-information", metavar="CSV",
                                                   help="With --theta: write each item's "
                                                        "information at each theta (mirt's "
                                                        "iteminfo) to this CSV."),
             freq_column: str = typer.Option(None, "--freq-column",
                                             help="Column holding pattern frequencies "
                                                  "(pattern data)."),
             rotate: str = typer.Option(None, "--rotate", metavar="oblimin|geomin|varimax|none",
                                        help="A multidimensional 2PL bank (a1, a2, ..., d "
                                             "columns): rotate its standardized loadings as "
                                             "mirt's summary() does; oblimin (quartimin, the "
                                             "default, as mirt) and geomin are oblique and "
                                             "give factor correlations.")):
        """Describe a response matrix or an item bank.

        For a matrix: subjects, items, missing fraction, whether its scores are 0/1 or a
        continuum, the quantiles of each subject's mean score (accuracy for 0/1; a matrix of
        integer ratings: its levels and mean-rating quantiles). For a bank: item count,
        parameter quantiles, items with a <= 0 or c > 0.5 (ordinal items: their categories
        and rating scales); a bank folder (atlas build-bank) also names its benchmark, its
        metric and the scale its scores are read on. --theta: the bank's test information. A
        multidimensional 2PL bank: its rotated factor loadings, communalities and factor
        correlations (--rotate).
        """
        output_file(item_information, "--item-information", inputs={"PATH": path})
        summary = describe(path, freq_column, rotate)
        if theta is not None or item_information is not None:
            summary["information"] = _information(path, summary, theta, item_information)
        if as_json:
            console.print_json(json.dumps(json_safe(summary)))
            return
        if summary["kind"] in ("responses", "ratings", "scores"):
            _print_matrix(path, summary)
        elif summary["kind"] == "suite":
            _print_suite(path, summary)
        elif summary["kind"] == "multidim_bank":
            print_multidim(path, summary)
        else:
            _print_bank(path, summary)
        if "information" in summary:
            _print_information(summary["information"], item_information)


def _information(path: str, summary: dict, theta, item_information) -> dict:
    """The bank's information at --theta (written per item to --item-information)."""
    from ..catalogue import KINDS, BankRef
    from ..errors import ConfigError
    from ..irt.testinfo import information_at, parse_thetas

    if summary["kind"] == "suite":
        first = summary["members"][0]["name"]
        raise ConfigError(f"--theta: each member of suite {summary['name']!r} has its own theta "
                          f"scale; ask one member's bank (atlas info {first} --theta ...)")
    if summary["kind"] == "multidim_bank":
        raise ConfigError(f"--theta: {path!r} is a {summary['n_dims']}-dimensional 2PL bank; test "
                          "information at one theta is for a one-dimensional bank")
    if summary["kind"] != "bank":
        raise ConfigError("--theta and --item-information describe a bank, not a response "
                          "matrix")
    if theta is None:
        raise ConfigError("--item-information needs --theta (the abilities, e.g. -2,0,2)")
    bank = BankRef.from_option(path, option="PATH", normalize_ids=False, kinds=KINDS).load()
    table = information_at(bank, parse_thetas(theta))
    if item_information is not None:
        item_information.parent.mkdir(parents=True, exist_ok=True)
        table.items_frame().to_csv(item_information, index=False, float_format="%.6g")
    return table.to_dict()


def _print_information(info: dict, written) -> None:
    console.print("  theta  test information  SE (1/sqrt)  most informative items",
                  highlight=False)
    for t, i, se, top in zip(info["theta"], info["test_information"], info["se"],
                             info["most_informative"]):
        console.print(f"  {t:5g}  {i:16.4g}  {se:11.4g}  {', '.join(top)}", highlight=False)
    if written is not None:
        console.print(f"wrote {written}")


def _print_matrix(path: str, summary: dict) -> None:
    if summary["kind"] == "ratings":
        lev = summary["levels"]
        console.print(f"[bold]{escape(path)}[/]: ratings matrix (levels {lev[0]:g}-{lev[-1]:g}, "
                      f"{len(lev)} distinct; {summary['levels_per_item']['min']}-"
                      f"{summary['levels_per_item']['max']} per item)")
    elif summary["kind"] == "scores":
        lo, hi = summary["range"]
        console.print(f"[bold]{escape(path)}[/]: response matrix of scores on another scale "
                      f"than 0-1 ({lo:g} to {hi:g})")
    else:
        console.print(f"[bold]{escape(path)}[/]: response matrix")
    scores = ("" if "binary" not in summary else "   scores: 0/1" if summary["binary"]
              else "   scores: in [0, 1], not all 0/1")
    patterns = f" ({summary['patterns']} response patterns)" if "patterns" in summary else ""
    console.print(f"  subjects: {summary['subjects']:g}{patterns}   items: {summary['items']}   "
                  f"missing: {summary['missing_fraction']:.1%}" + scores)
    if summary["kind"] == "ratings":
        console.print(f"  mean rating per subject: {_spread(summary['mean_rating_quantiles'])}")
    else:
        what = "accuracy" if summary.get("binary") else "mean score"
        console.print(f"  {what} per subject: {_spread(summary['mean_score_quantiles'])}")
    console.print(f"  items per subject: {_spread(summary['items_per_subject'])}")
    if summary["subjects_without_response"] or summary["items_without_response"]:
        console.print(f"  [yellow]all-missing: {summary['subjects_without_response']} subjects, "
                      f"{summary['items_without_response']} items[/]")
    if summary["kind"] == "ratings":   # the two ways in, on the ratings' own scale
        lo, hi = (f"{v:g}" for v in (summary["levels"][0], summary["levels"][-1]))
        console.print(f"  next: atlas calibrate {escape(path)} --model graded --rating-range "
                      f"{lo} {hi} -o bank.csv (ordinal items), or atlas build-bank {escape(path)} "
                      f"--score-range {lo} {hi} -o bank/ (a score on its scale: from fewer than "
                      "~100 models, the honest full-score prediction)", highlight=False)
    if summary["kind"] == "scores":    # the metric's scale: 0 100 when the scores fit it
        lo, hi = summary["range"]
        scale = "0 100" if 0 <= lo and hi <= 100 else "LO HI"
        console.print(f"  next: atlas build-bank {escape(path)} --score-range {scale} -o bank/ "
                      "(the metric's own scale, e.g. 0 100 for BLEU or a percent)",
                      highlight=False)


def print_multidim(path: str, summary: dict) -> None:
    """A multidimensional 2PL bank's rotated loadings, communalities and factor correlations
    (atlas info, and atlas calibrate --dims after its fit)."""
    k = summary["n_dims"]
    console.print(f"[bold]{escape(path)}[/]: multidimensional 2PL bank, {summary['n_items']} items, "
                  f"{k} factors")
    rot = summary["rotation"]
    console.print(f"  standardized loadings, {rot} rotation (mirt's summary)"
                  + ("" if summary["converged"] else ", [yellow]rotation not converged[/]") + ":")
    names = [f"F{i + 1}" for i in range(k)]
    width = max(7, *(len(i) for i in summary["loadings"]))
    console.print("  " + "item".ljust(width) + "".join(f"{c:>8}" for c in [*names, "h2"]),
                  highlight=False)
    for item, row in summary["loadings"].items():
        console.print("  " + escape(item.ljust(width))
                      + "".join(f"{row[c]:8.3f}" for c in [*names, "h2"]), highlight=False)
    phi = summary["factor_correlations"]
    words = "" if rot in ("oblimin", "geomin") else " (orthogonal rotation: uncorrelated)"
    console.print(f"  factor correlations{words}:")
    for i in range(k):
        console.print(f"  {names[i]:>{width}}" + "".join(f"{phi[i][j]:8.3f}" for j in range(i + 1)),
                      highlight=False)


def _print_suite(path: str, summary: dict) -> None:
    console.print(f"[bold]{escape(path)}[/]: suite of {len(summary['members'])} benchmarks, "
                  f"{summary['n_items']} items; predicts the {summary['aggregate']} in one "
                  "adaptive test (atlas evaluate --suite, atlas simulate --suite)")
    for m in summary["members"]:
        console.print(f"  {escape(m['name'])}: {m['n_items']} items, model {m['model']}, "
                      f"weight {m['weight']:.4g} (its parameters: atlas info "
                      f"{escape(m['bank'])})", highlight=False)


def _print_bank(path: str, summary: dict) -> None:
    console.print(f"[bold]{escape(path)}[/]: item bank, {summary['n_items']} items, "
                  f"model {summary['model']}")
    if "benchmark" in summary:  # a bank folder: its benchmark and metric, as a run says them
        from ..live.report import scale_words

        console.print(f"  benchmark: {escape(summary['benchmark'])}", highlight=False)
        if "metric" in summary:
            console.print(f"  metric: {escape(summary['metric'])}, {scale_words(summary)}",
                          highlight=False)
    if "levels" in summary:   # ordinal items (graded / gpcm)
        k = summary["n_categories"]
        models = ", ".join(f"{n} {m}" for m, n in summary["models"].items())
        console.print(f"  categories per item: {k['min']}-{k['max']}; items: {models}")
        if summary.get("rating_scale"):
            lo, hi = summary["rating_scale"]
            console.print(f"  rating scale: {lo:g}-{hi:g} (every item)")
        scales = sorted(summary["levels"].items(), key=lambda kv: -kv[1])
        for scale, n in scales[:5]:
            console.print(f"  {n} item(s) rated {scale}")
        if len(scales) > 5:
            console.print(f"  {sum(n for _, n in scales[5:])} item(s) rated at "
                          f"{len(scales) - 5} other sets of levels (--json lists them)")
    for name, qs in summary["quantiles"].items():
        console.print(f"  {name}{_PARAMETER.get(name, '')}: {_spread(qs)}")
    na = summary["nonpositive_a"]
    console.print(f"  items with a <= 0: {len(na)}{_some(na)}")
    if "c_above_0.5" in summary:
        nc = summary["c_above_0.5"]
        console.print(f"  items with c > 0.5: {len(nc)}{_some(nc)}")


#: what a binary bank's parameter is, beside its name (P = c + (u - c) / (1 + exp(-a (theta - b))))
_PARAMETER = {"a": " (slope)", "b": " (difficulty, on theta's scale)", "c": " (lower asymptote)",
              "u": " (upper asymptote)",
              "dispersion": " (continuous scores: Var = phi P (1 - P); information a^2 P Q / phi)"}


def _spread(qs: dict) -> str:
    """``{'min': 0.1, 'q05': 0.2, ...}`` as ``min 0.1, q05 0.2, ...``."""
    return ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
                     for k, v in qs.items())


def _some(ids: list) -> str:
    """The first ten of ``ids`` in parentheses (nothing when there are none)."""
    if not ids:
        return ""
    more = f" and {len(ids) - 10} more" if len(ids) > 10 else ""
    return " (" + ", ".join(str(i) for i in ids[:10]) + more + ")"
