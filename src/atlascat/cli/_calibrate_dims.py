"""``atlas calibrate RESPONSES --dims K -o BANK``: the exploratory K-dimensional 2PL, as mirt's
``mirt(data, K)`` and ``summary(mod)`` (the work: :func:`atlascat.irt.multidimcal.calibrate_multidim`)."""
from __future__ import annotations

import json
from pathlib import Path

from ..irt.defaults import AUTO
from ._common import (console, json_safe, load_responses, progress_bar, subjects_text, warn,
                      wrote_line)

#: what --dims fits, said when something else is asked
SUPPORTED = ("--dims fits the exploratory multidimensional 2PL to 0/1 answers of one "
             "population (--model 2pl, the default with --dims; no groups, no asymptotes)")


def calibrate_dims_cmd(responses, output: Path, dims: int, *, model: str, prior_a: str,
                       mirt_defaults: bool, quadpts, max_iter: int, tol: float, rotate: str,
                       summary, name, freq_column, normalize_ids: bool, drop_empty: bool,
                       seed, quiet: bool, unsupported: dict, scores=None, se: bool = False,
                       fmt: str = "ours") -> None:
    """Fit, write the bank (a1..aK, d; with ``se`` <parameter>_se beside each), the --summary
    JSON and the --scores CSV (EAP theta_1..theta_K and se_1..se_K on the bank's varimax axes),
    print the fit and mirt's rotated summary. ``unsupported``: the options given that a
    K-dimensional fit has no use for; ``fmt`` "mirt": the bank as mirt's coef(mod, simplify =
    TRUE)$items, X, a1..aK, d, g, u."""
    from ..errors import ConfigError, ResponseDataError
    from ..irt.multidimcal import PRIOR_D_SD
    from ..irt.rotation import ROTATIONS

    if model.lower() not in (AUTO, "2pl"):
        raise ConfigError(f"--model {model}: {SUPPORTED}")
    given = [opt for opt, on in unsupported.items() if on]
    if given:
        raise ConfigError(f"{given[0]} is not available with --dims; {SUPPORTED}")
    if dims < 2:
        raise ConfigError(f"--dims must be 2 or more (got {dims}); the unidimensional fit is "
                          "atlas calibrate without --dims")
    if se and dims > 3:
        raise ConfigError("--se with --dims: standard errors are available for 2 or 3 "
                          f"dimensions (the EM fits), not {dims}")
    if rotate not in ROTATIONS:
        raise ConfigError(f"--rotate must be one of {', '.join(ROTATIONS)}, not {rotate!r}")
    a_sd = None if mirt_defaults and prior_a == AUTO else prior_a_sd(prior_a)   # as the 1-D
    d_sd = None if mirt_defaults else PRIOR_D_SD
    try:
        rm = load_responses(responses, freq_column=freq_column, normalize_ids=normalize_ids,
                            on_empty="drop" if drop_empty else "error")
    except ResponseDataError as exc:   # ratings: said with what --dims fits
        from ._common import whole_ratings

        if not whole_ratings(responses, freq_column):   # a missing file, a bad type: as is
            raise
        raise ResponseDataError(f"{SUPPORTED}: {exc}") from None
    if len(rm.item_ids) <= dims:
        raise ConfigError(f"--dims {dims} needs more than {dims} items; {responses} has "
                          f"{len(rm.item_ids)}")
    res = _fit(rm, dims, a_sd, d_sd, quadpts, max_iter, tol, seed, quiet, se)
    bank = res.bank if name is None else _named(res.bank, name)
    frame = None
    if fmt == "mirt":
        from ..irt.multidimframe import mirt_frame

        frame = mirt_frame(bank)
    if res.se is not None:
        from ..irt.multidimse import write_bank_with_se

        write_bank_with_se(bank, res.se, output, frame=frame)
    elif frame is not None:
        from ..irt.bank import write_frame

        write_frame(frame, output)
    else:
        bank.write(output)
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        info = {**res.to_dict(rotate), "responses": str(responses), "output": str(output),
                "format": fmt,
                **({"benchmark": name} if name else {})}
        summary.write_text(json.dumps(json_safe(info), indent=2))
    if scores is not None:
        _write_scores(res.bank, rm, scores)
    _report(res, rm, rotate, str(output))
    console.print(wrote_line(output, summary, scores))


def _write_scores(bank, rm, path: Path) -> None:
    """The subjects' EAP scores on the fitted bank (mirt's fscores(mod, rotate = "none") with
    full.scores.SE = TRUE, on the bank's axes) in the columns ``atlas score`` writes on the
    bank: subject_id, theta_k, se_k, n_items, mean_score [, freq]."""
    from ..irt.multidimscore import score_multidim
    from ._score_table import with_mean_score, write_calibration_scores

    df = with_mean_score(score_multidim(rm, bank, "eap").to_frame(),
                         rm.aligned_values(bank.item_ids, extra="ignore"), rm.weights, at=None)
    write_calibration_scores(df, path)


def prior_a_sd(spec: str):
    """--prior-a as the sd of the loadings' N(0, sd^2) prior: auto (MultidimIRT's 3), none, or
    norm(0,SD) (the prior is isotropic: mean 0, the same on every loading)."""
    import re

    from ..errors import ConfigError
    from ..irt.multidimcal import PRIOR_A_SD

    text = str(spec).strip().lower().replace(" ", "")
    if text == AUTO:
        return PRIOR_A_SD
    if text == "none":
        return None
    m = re.fullmatch(r"norm(?:al)?\(0(?:\.0*)?,([0-9.eE+-]+)\)", text)
    sd = float(m.group(1)) if m and _number(m.group(1)) else None
    if sd is None or not sd > 0:
        raise ConfigError(f"--prior-a {spec!r} with --dims: the loadings' prior is auto "
                          "(norm(0,3)), none, or norm(0,SD) with SD > 0 (mean 0: rotations "
                          "leave it unchanged)")
    return sd


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _named(bank, name: str):
    """The bank with its benchmark's name in a benchmark column (as atlas calibrate --name)."""
    import pandas as pd

    from ..irt.multidim import MultidimBank

    meta = pd.DataFrame({"benchmark": [name] * len(bank)})
    return MultidimBank(bank.item_ids, bank.loadings, bank.intercepts, metadata=meta)


def _fit(rm, dims, a_sd, d_sd, quadpts, max_iter, tol, seed, quiet: bool, se: bool):
    """calibrate_multidim with a progress bar over its iterations (unless quiet); the
    non-convergence warning is left to :func:`_report`."""
    import warnings

    from ..irt.multidimcal import calibrate_multidim

    kw = dict(prior_a_sd=a_sd, prior_d_sd=d_sd, quadpts=quadpts, max_iter=max_iter, tol=tol,
              random_state=seed, se=se)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "the .* did not converge", UserWarning)
        if quiet:
            return calibrate_multidim(rm, dims, **kw)
        total = max_iter or (500 if dims <= 3 else 2100)   # MultidimIRT's caps, burn-in 100
        with progress_bar("EM" if dims <= 3 else "MH-RM", total=total) as advance:
            res = calibrate_multidim(rm, dims, callback=lambda info: advance(1), **kw)
            advance(0, total=max(res.n_iter, 1))
    return res


def _report(res, rm, rotate: str, output: str) -> None:
    """The fit in a few lines (as the 1-D path: items, subjects, log-likelihood, iterations,
    criteria, the priors), then mirt's summary(mod): the rotated loadings and correlations."""
    from ._criteria import print_criteria
    from .cmd_info import print_multidim

    s = res.settings
    status = "converged" if res.converged else "[yellow]not converged (raise --max-iter)[/]"
    how = (f"EM, {s['quadpts']} points per dimension" if s["method"] == "em" else
           f"MH-RM; log-likelihood by {s['loglik']}")
    console.print(
        f"calibrated [bold]{len(res.bank)}[/] items (2PL, {res.n_dims} dimensions, exploratory) "
        f"on {subjects_text(len(res.subject_ids), rm.weights)}: log-likelihood "
        f"{res.loglik:.3f}, {res.n_iter} iterations ({how}), {status}, {res.seconds:.1f} s")
    print_criteria(_Criteria(res))
    if s["prior_a"] or s["prior_d"]:
        console.print(f"priors: a ~ {s['prior_a'] or 'none'}, d ~ {s['prior_d'] or 'none'} "
                      "(posterior modes; mirt's fit has none: --mirt-defaults, --prior-a left at auto)",
                      markup=False, highlight=False)
    else:
        console.print("no priors (maximum likelihood, as mirt)", highlight=False)
    if res.se is not None:
        kind = "posterior-mode " if res.se.posterior_mode else ""
        console.print(f"standard errors from the {kind}observed information (Louis, as mirt's "
                      f"SE=TRUE), {s['se_seconds']:.1f} s: <parameter>_se columns (the bank's "
                      "varimax loadings; mirt's coef(printSE=TRUE) orientation in Python: "
                      "res.standard_errors(\"none\"))", markup=False, highlight=False)
    if not res.converged:
        warn(f"the {res.n_dims}-dimensional 2PL stopped at {res.n_iter} iterations before "
             "converging")
    print_multidim(output, {"n_dims": res.n_dims, "n_items": len(res.bank),
                             **res.factor_loadings(rotate).to_dict()})


class _Criteria:
    """A fit as print_criteria reads it (no G2, no standard errors)."""

    def __init__(self, res):
        self.information_criteria, self.settings = res.information_criteria, res.settings
        self.se = None
