"""``atlas anova RESPONSES --model rasch --model 2pl``: nested models compared as mirt's
``anova(m1, m2)`` (AIC, SABIC, HQ, BIC, logLik, X2, df, p)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..irt.defaults import QUADPTS
from ._common import (RESPONSES_HELP, console, group_keywords, load_responses, output_file,
                      print_frame, progress_bar)


def _binary_models_need_01(values, binary: list, responses: str) -> None:
    """Refuse a right/wrong model on ratings (levels other than 0 and 1), in one line."""
    import numpy as np

    from ..errors import ConfigError

    levels = np.unique(values[~np.isnan(values)])
    if binary and not set(levels.tolist()) <= {0.0, 1.0}:
        raise ConfigError(f"--model {binary[0]} fits right/wrong (0/1) answers but {responses} "
                          f"holds ratings {levels[0]:g}-{levels[-1]:g}; fit ratings with "
                          "--model graded, gpcm or pcm (the partial credit model, mirt's Rasch "
                          "of ratings, nested in gpcm)")


def _all_nested(fits) -> bool:
    """Whether each model, by number of parameters, is nested in the next (a test applies)."""
    from ..irt.compare import nested_fits

    order = sorted(fits, key=lambda f: f.information_criteria()["n_parameters"])
    return all(nested_fits(a, b) for a, b in zip(order, order[1:]))


def _asked(names: list, dims, grouped: bool = False) -> list:
    """The fits asked: (row name, model, K, with the groups); --dims K >= 2 is the 2PL's
    (exploratory, in K dimensions), the other models are fitted in one; the 2PL in one when
    --dims is not given or holds 1. ``grouped`` (--groups): each model in one dimension also
    fitted with the groups (row "<model>-groups"), mirt's anova(stacked, grouped)."""
    from ..errors import ConfigError

    dims = sorted(set(dims or [1]))
    if dims[0] < 1:
        raise ConfigError(f"--dims must be 1 or more, not {dims[0]}")
    if dims[-1] > 1 and "2pl" not in names:
        raise ConfigError(f"--dims {dims[-1]} fits the exploratory {dims[-1]}-dimensional 2PL "
                          "(0/1 answers; mirt's mirt(data, K)): add --model 2pl")
    if grouped and dims[-1] > 1:
        raise ConfigError("--groups compares one-dimensional models (rasch, 1pl-4pl, graded, "
                          "gpcm, pcm) fitted with and without the groups; drop --dims K >= 2")
    fits = [(m, m, 1, False) for m in names if m != "2pl" or 1 in dims]
    fits += [(f"2pl-{k}d", "2pl", k, False) for k in dims if k > 1]
    fits += [(f"{m}-groups", m, 1, True) for m in names] if grouped else []
    if len(fits) < 2 or len(set(names)) < len(names):
        raise ConfigError("anova needs two or more different --model values (or --dims), or "
                          "one with --groups, e.g. --model rasch --model 2pl, --model 2pl "
                          "--dims 1 --dims 2, or --model 2pl --groups groups.csv")
    return fits


def _fit_one(rm, weights, model: str, k: int, quadpts: int, grouping=None):
    """One maximum-likelihood fit (no priors, as mirt's): atlascat.calibrate for K = 1 (with
    ``grouping``, its groups and reference_group keywords: a multiple-group fit), the
    exploratory K-dimensional 2PL (mirt's quadrature unless --quadpts is given) for K >= 2."""
    if k == 1:
        from ..irt.calibrate import calibrate

        return calibrate(rm, model=model, quadpts=quadpts, prior_a=None, prior_c=None,
                         prior_u=None, weights=weights, **(grouping or {}))
    from ..irt.multidimcal import calibrate_multidim

    if weights is not None:   # ratings read for an ordinal model: the 2PL's 0/1 answers
        from ..responses import ResponseMatrix

        rm = ResponseMatrix(rm.to_numpy(float), subject_ids=rm.index, item_ids=rm.columns,
                            weights=weights)
    return calibrate_multidim(rm, k, prior_a_sd=None, prior_d_sd=None,
                              quadpts=None if quadpts == QUADPTS else quadpts)


def _fit_all(rm, weights, asked, quadpts: int, grouping: dict) -> list:
    """The fits ``asked`` (:func:`_asked`), one EM fit each on a bar counting them."""
    import warnings

    from ..errors import ConfigError

    n_items = rm.n_items if hasattr(rm, "n_items") else rm.shape[1]
    k = max(a[2] for a in asked)
    if k > 1 and n_items <= k:   # said before any fit, in the options' words
        raise ConfigError(f"--dims {k} needs more than {k} items; the responses have {n_items}")
    fits = []
    with warnings.catch_warnings(), progress_bar("fits", total=len(asked)) as advance:
        warnings.simplefilter("ignore")   # the defaults' notes; the models are given
        for _, m, k, grouped in asked:
            fits.append(_fit_one(rm, weights, m, k, quadpts, grouping if grouped else None))
            advance(1)
    return fits


def _not_nested_line(fits, names) -> str:
    """Why no likelihood-ratio test: the models are not nested, or two of them are one model on
    these data (a graded or GPCM item with two categories is the 2PL)."""
    crit = [f.information_criteria() for f in fits]
    for i in range(len(fits)):
        for j in range(i + 1, len(fits)):
            a, b = crit[i], crit[j]
            if a["n_parameters"] == b["n_parameters"] and \
                    abs(a["loglik"] - b["loglik"]) <= 1e-6 * abs(a["loglik"]):
                return (f"{names[i]} and {names[j]} are one model on these data (every item has "
                        "two categories: a graded or gpcm item with two is the 2PL); no "
                        "likelihood-ratio test")
    return ("these models are not nested: no likelihood-ratio test (X2, df, p); compare their "
            "AIC and BIC (lower is better)")


def register(app: typer.Typer) -> None:
    @app.command("anova")
    def anova_cmd(
        responses: str = typer.Argument(..., metavar="RESPONSES", help=RESPONSES_HELP),
        models: List[str] = typer.Option(..., "--model",
                                         help="IRT model to fit (rasch, 1pl, 2pl, 3pl, 4pl, graded, gpcm, "
                                              "pcm); give two or more, e.g. --model rasch "
                                              "--model 2pl, --model pcm --model gpcm."),
        output: Optional[Path] = typer.Option(None, "-o", "--output",
                                              help="Write the table here (CSV)."),
        as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
        quadpts: int = typer.Option(QUADPTS, "--quadpts", help="Quadrature nodes on [-6, 6]."),
        freq_column: Optional[str] = typer.Option(None, "--freq-column",
                                                  help="Column holding pattern frequencies."),
        normalize_ids: bool = typer.Option(False, "--normalize-ids",
                                           help="Strip R's 'X' from item ids (X514 -> 514)."),
        dims: Optional[List[int]] = typer.Option(
            None, "--dims", metavar="K", help="Dimensions of the 2PL (repeat: --dims 1 --dims "
            "2 is mirt's anova(mod1, mod2)); K >= 2: the exploratory K-dimensional 2PL."),
        groups: Optional[Path] = typer.Option(
            None, "--groups", metavar="FILE", help="Each model also fitted with these groups "
            "(subject id, group; as atlas calibrate --groups): mirt's anova(stacked, grouped)."),
        reference_group: Optional[str] = typer.Option(
            None, "--reference-group", metavar="LABEL",
            help="With --groups: the group whose trait is N(0, 1)."),
    ):
        """Fit each model by maximum likelihood (no priors, as mirt) and compare them: AIC,
        SABIC, HQ, BIC, log-likelihood and the likelihood-ratio test of each model against the
        one above it (X2, df, p), as mirt's anova. Models that are not nested (graded and gpcm)
        get their criteria alone: compare their AIC and BIC. --dims: the 2PL in K dimensions
        (exploratory; J (K + 1) - K (K - 1) / 2 parameters, as mirt). --groups: each model
        also with the groups' means and SDs free (2 (G - 1) more parameters), as mirt's
        anova(stacked, grouped).
        """
        import json
        import math

        from ..errors import ConfigError
        from ..irt.calibrate import MODELS, ORDINAL
        from ..irt.compare import anova
        from ..validation import json_safe

        names = [m.lower() for m in models]
        bad = [m for m in names if m not in MODELS + ORDINAL]
        if bad:
            raise ConfigError(f"--model {bad[0]!r} is not a model atlas calibrate fits; choose "
                              f"from {', '.join(MODELS + ORDINAL)}")
        if reference_group is not None and groups is None:
            raise ConfigError("--reference-group needs --groups")
        asked = _asked(names, dims, groups is not None)
        names = [a[0] for a in asked]
        output_file(output, inputs={"RESPONSES": responses})
        grouping = group_keywords(groups, reference_group)
        rm, weights = _read_data(responses, [a[1] for a in asked], freq_column, normalize_ids,
                                 "keep" if grouping else "drop")
        fits = _fit_all(rm, weights, asked, quadpts, grouping)
        test = _all_nested(fits)
        table = anova(*fits, names=names, test=test)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(output, float_format="%.10g")
        if as_json:
            rows = [{"model": k, **v} for k, v in table.to_dict(orient="index").items()]
            console.print_json(json.dumps(json_safe(rows)))
            return
        shown = table.reset_index().astype(object)
        shown["df"] = ["" if math.isnan(v) else int(v) for v in table["df"]]   # a count, as mirt's
        shown = shown.where(shown.notna(), "")   # the first row has no test, as mirt's
        if not test:   # no test at all: no empty X2, df, p columns (the file keeps them)
            shown = shown.drop(columns=["X2", "df", "p"])
        print_frame(shown, title="anova (maximum likelihood, mirt's columns)",
                    float_format="{:.3f}")
        if not test:
            console.print(_not_nested_line(fits, names), markup=False, highlight=False)
        for f, name in zip(fits, names):
            if not f.converged:
                console.print(f"[yellow]warning:[/] the {name} fit did not converge")
        if output is not None:
            console.print(f"wrote {output}", markup=False, highlight=False)


def _read_data(responses, names, freq_column, normalize_ids, on_empty: str = "drop"):
    """(data, pattern weights): ratings on their own scale when an ordinal model is among
    ``names`` (as calibrate reads them), else the 0/1 response matrix (its weights inside;
    ``on_empty`` "keep" with --groups: calibrate drops the empty subjects after matching the
    groups file to the subjects read)."""
    from ..irt.calibrate import ORDINAL

    if not any(m in ORDINAL for m in names):
        return load_responses(responses, freq_column=freq_column, normalize_ids=normalize_ids,
                              on_empty=on_empty), None
    import pandas as pd

    from ..irt.polycal import read_ratings

    values, sids, iids, weights = read_ratings(responses, freq_column=freq_column)
    if normalize_ids:   # R's X514 -> 514, as the binary reader does
        from ..validation import normalize_item_id

        iids = [normalize_item_id(i) for i in iids]
    _binary_models_need_01(values, [m for m in names if m not in ORDINAL], responses)
    return pd.DataFrame(values, index=sids, columns=iids), weights
