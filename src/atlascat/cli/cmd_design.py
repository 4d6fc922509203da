"""``atlas design``: assemble a D-, A- or E-optimal fixed form from an item bank."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ._common import (bank_option_help, check_seed, console, json_safe, number, output_file,
                      print_frame, progress_bar, warn)
from ._options import cli_names

#: the library's names in an error -> the options that set them (``cli_names``)
_OPTIONS = {"form length k": "-k/--length", "unknown criterion": "unknown --criterion",
            "prior_precision": "--prior-precision"}


def load_design_bank(spec: str):
    """(its :class:`atlascat.catalogue.BankRef`, the bank) of ``--bank``: a bank file with a1,
    a2, d columns is a multidimensional 2PL (MultidimBank)."""
    from ..catalogue import BankRef

    ref = BankRef.from_option(spec)
    return ref, _design_bank(ref)


def _design_bank(ref):
    """The bank ``ref`` names, a multidimensional one for a1, a2, d columns."""
    if ref.kind == "file":
        from ..irt.multidim import MultidimBank
        from ..validation import read_frame

        cols = set(read_frame(Path(ref.name), what="bank file", option="--bank",
                              nrows=0).columns.astype(str))
        if {"a1", "a2", "d"} <= cols:  # a multidimensional 2PL (MultidimBank.is_multidim_file)
            return MultidimBank.read(ref.name)
    return ref.load()


def _scored_by_link(ref, spec: str, form=None) -> str:
    """A bank with a score link (a bank folder, a shipped content bank): how a model's answers
    to the form become its predicted score (the form's file holds parameters only; ``form``:
    its path when it carries cross-fitted factors, which ``atlas score --form`` applies)."""
    if ref.kind == "file" or ref.link is None:
        return ""
    beyond = ("; for a model that may be stronger than every source model, the folder's "
              f"predictor (atlas evaluate --bank {spec}) holds and a fixed form does not "
              "(benchmarks/results/fixed_forms.md)") if ref.kind == "dir" else ""
    from ..live.service import score_title

    if form is not None:   # its factors widen the SE and interval
        return (f"; a model's answers to the form, scored with `atlas score ANSWERS --bank "
                f"{spec} --form {form}`, give its {score_title(ref)} with a 95% interval, SE "
                f"and interval widened by the form's cross-fitted factors{beyond}")
    return (f"; a model's answers to the form, scored with `atlas score ANSWERS --bank {spec}`, "
            f"give its {score_title(ref)} with a 95% interval (the form's file has "
            f"the items' parameters only){beyond}")


def _abilities(ref, thetas, n_dims: int) -> tuple:
    """(the abilities the form is designed for, in words): ``--thetas``' sample, else the
    bank's default (:meth:`atlascat.catalogue.BankRef.design_abilities`: its score link's
    calibration models), else N(0, I)."""
    if thetas is not None:
        return _read_thetas(thetas, n_dims), f"the abilities in {thetas}"
    source, words = ref.design_abilities() if n_dims == 1 else (None, None)
    if source is not None:
        return source, f"{words}; --thetas FILE for others"
    return None, f"N(0, {'I' if n_dims > 1 else '1'}) abilities (--thetas FILE for others)"


def _cross_fit(ref, res, n_items: int, thetas, prior_precision, exchange: bool):
    """The form's factors cross-fitted on a bank folder's source answers
    (:func:`atlascat.bankdir.formfactor.form_factors`; ``thetas``: the --thetas sample, else
    each fold's source models), or None: not a folder, a folder built before it kept them, or a
    whole-bank form."""
    if ref.kind != "dir" or res.k >= n_items:
        return None
    from ..bankdir.formfactor import form_factors

    answers = ref.folder().source_answers()
    if answers is None:
        return None
    with progress_bar("cross-fitting the form's precision", None) as advance:
        return form_factors(ref.folder(), res.k, res.criterion, thetas, exchange=exchange,
                            prior_precision=prior_precision, answers=answers, on_fold=advance)


def _summary(bank: str, ref, b, res, sample, abilities: str, n_dims: int,
             prior_precision, factors=None) -> dict:
    """The form's figures: the bank, the criterion's value, the abilities it is designed for;
    for one dimension its expected SE (the A criterion is the mean posterior variance over
    the abilities), the cross-fitted factors (``factors``) or else what that SE does not say
    about new models (:meth:`~atlascat.catalogue.BankRef.design_warning`)."""
    import numpy as np

    from ..design.optimal import form_criterion

    summary = {"bank": bank, "n_items": len(b), "criterion": res.criterion, "k": res.k,
               "value": res.value, "greedy_value": res.greedy_value,
               "n_exchanges": res.n_exchanges, "abilities": abilities}
    if n_dims == 1:
        summary["expected_se"] = float(np.sqrt(form_criterion(
            b, res.indices, "A", sample, prior_precision=prior_precision)))
        if factors is not None:
            summary["cross_fit"] = factors.to_dict()
        warning = ref.design_warning(cross_fitted=factors is not None)
        if warning:
            summary["warning"] = warning
    return summary


def _show(form, res, b, summary: dict, random_forms: int, output, ref, bank: str) -> None:
    """The form's table and figures, as the command prints them."""
    cols = [c for c in form.columns if c in ("position", "item_id", "a", "b", "c", "u", "d")
            or (str(c)[:1] in "abd" and str(c)[1:].isdigit())]   # a1.., graded b1.. / d1..
    print_frame(form[cols], title=f"{res.criterion}-optimal form, {res.k} of {len(b)} items")
    direction = "minimized" if res.criterion == "A" else "maximized"
    console.print(f"designed for: {summary['abilities']}\ncriterion {res.criterion} "
                  f"({direction}): {res.value:.6g} (greedy {res.greedy_value:.6g}, "
                  f"{res.n_exchanges} exchange(s))")
    if "expected_se" in summary:
        console.print(f"expected SE over the abilities: {summary['expected_se']:.3f} (root "
                      "mean of 1 / (prior precision + test information) over them)")
    cf = summary.get("cross_fit")
    if cf is not None:
        console.print(f"cross-fitted on the source models ({cf['folds']} folds, {cf['n']} held "
                      f"out): SE beyond the whole bank's x{cf['se']:.2f} (theta off the whole "
                      f"bank's by {cf['realized']:.3f} RMS, the model says {cf['model']:.3f}), "
                      f"score interval x{cf['interval']:.2f} (covered {cf['coverage_before']:.2f}"
                      f" of them, {cf['coverage_after']:.2f} widened)")
    if "warning" in summary:
        warn(summary["warning"])
    if random_forms > 0:
        console.print(f"median of {random_forms} random {res.k}-item forms: "
                      f"{summary['random_median']:.6g}; beats {summary['fraction_beaten']:.0%} of them")
        console.print(f"integrated information: {summary['info']:.4g} vs random median "
                      f"{summary['random_info_median']:.4g} (ratio {number(summary['info_ratio'], '.2f')})")
    if output is not None:
        written = " with its factors" if cf is not None else ""
        console.print(f"wrote {output}{written}"
                      f"{_scored_by_link(ref, bank, output if cf is not None else None)}")


def _read_thetas(path: Path, n_dims: int):
    import numpy as np
    import pandas as pd

    from ..errors import ConfigError
    from ..validation import read_frame

    df = read_frame(path, what="theta file", option="--thetas", error=ConfigError,
                    min_columns=2)   # a lone column whose header holds ';': named as such
    names = {str(c).lower(): c for c in df.columns}
    want = ["theta"] if n_dims == 1 else [f"theta{d}" for d in range(1, n_dims + 1)]
    if n_dims == 1 and "theta" not in names and "theta1" in names:
        want = ["theta1"]
    if not all(w in names for w in want):   # other theta* columns (theta_ref, ...) are not read
        found = [c for c in df.columns if str(c).lower().startswith("theta")]
        raise ConfigError(f"--thetas {str(path)!r}: no column {' / '.join(want)} with abilities for "
                          f"a bank of {n_dims} dimension(s) (theta columns: {found or 'none'})")
    cols = [names[w] for w in want]
    values = df[cols].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    if not len(values):
        raise ConfigError(f"--thetas {str(path)!r} holds no abilities (a header and no rows)")
    bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
    if bad.size:
        raise ConfigError(f"--thetas {str(path)!r}: row {bad[0]} ({bad.size} row(s) in all) holds "
                          f"no finite ability in {' / '.join(map(str, cols))}; drop such rows")
    return values[:, 0] if n_dims == 1 else values


def register(app: typer.Typer) -> None:
    @app.command("design")
    def design(
        bank: str = typer.Option(..., "--bank", "-b",
                                 help=bank_option_help("A file with a1..aK,d columns is a "
                                                       "multidimensional 2PL.")),
        criterion: str = typer.Option("D", "--criterion", "-c", help="D, A or E optimality."),
        k: int = typer.Option(50, "-k", "--length", help="Number of items in the form."),
        output: Path = typer.Option(None, "-o", "--output", help="Write the form (bank rows) to CSV."),
        thetas: Path = typer.Option(None, "--thetas",
                                    help="CSV of abilities (theta, theta1..thetaK) to design for "
                                         "[default: its score link's models, else N(0, I)]."),
        prior_precision: float = typer.Option(None, "--prior-precision",
                                              help="Lambda_0, 0 = pure Fisher information "
                                                   "[default: inverse variance of the theta "
                                                   "distribution]."),
        exchange: bool = typer.Option(True, "--exchange/--no-exchange", help="Run the exchange pass."),
        random_forms: int = typer.Option(50, "--random-forms",
                                         help="Compare with this many random forms (0: skip)."),
        seed: int = typer.Option(0, "--seed", help="Seed for the random comparison forms."),
        cross_fit: bool = typer.Option(True, "--cross-fit/--no-cross-fit",
                                       help="On a bank folder: fit the factors that make the "
                                            "form's SE and score interval honest on new models "
                                            "on its source models (3 folds) and write them "
                                            "with the form (atlas score --form applies them)."),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON summary instead of tables."),
    ):
        """Choose K items maximizing D-, A- or E-optimality over a theta distribution.

        D: integrated log information; A: integrated inverse information (minimized); E: minimum
        information over the central 95% of the distribution. Greedy selection plus an exchange
        pass; see atlascat.design.optimal.
        """
        import numpy as np

        from ..design.optimal import optimal_form, random_form_baseline
        from ..errors import ConfigError

        output_file(output, inputs={"--bank": bank, "--thetas": thetas})
        check_seed(seed)
        if random_forms < 0:
            raise ConfigError(f"--random-forms ({random_forms}) must be >= 0 (0: no comparison)")
        ref, b = load_design_bank(bank)
        n_dims = int(np.asarray(b.loadings).shape[1]) if hasattr(b, "loadings") else 1
        sample, abilities = _abilities(ref, thetas, n_dims)
        res = cli_names(lambda: optimal_form(b, k, criterion, sample, exchange=exchange,
                                             prior_precision=prior_precision), _OPTIONS)
        factors = (_cross_fit(ref, res, len(b), sample if thetas is not None else None,
                              prior_precision, exchange) if cross_fit and n_dims == 1 else None)
        summary = _summary(bank, ref, b, res, sample, abilities, n_dims, prior_precision,
                           factors)
        random_forms = 0 if res.k == len(b) else random_forms   # a whole-bank form: no comparison
        if random_forms > 0:
            cmp = random_form_baseline(b, res.indices, res.criterion, sample, n_forms=random_forms,
                                       rng=np.random.default_rng(seed),
                                       prior_precision=prior_precision)
            summary.update({key: cmp[key] for key in ("random_median", "info", "random_info_median",
                                                      "info_ratio", "fraction_beaten")})
        from ..bankdir.formfactor import with_factors

        form = with_factors(res.to_frame(b), factors)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            form.to_csv(output, index=False, float_format="%.17g")
            summary["output"] = str(output)
        if as_json:
            summary["item_ids"] = res.item_ids.tolist()
            console.print_json(json.dumps(json_safe(summary)))
            return
        _show(form, res, b, summary, random_forms, output, ref, bank)
