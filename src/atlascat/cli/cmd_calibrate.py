"""``atlas calibrate RESPONSES -o BANK``: calibrate an item bank by marginal maximum likelihood."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import (RESPONSES_HELP, console, escape, json_safe, load_responses, output_file,
                      progress_bar, quiet_option, subjects_text, warn)


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        responses: str = typer.Argument(..., metavar="RESPONSES", help=RESPONSES_HELP),
        output: Path = typer.Option(..., "-o", "--output", help="Bank file to write (.csv or .parquet)."),
        model: str = typer.Option("auto", "--model",
                                  help="IRT model: auto, rasch, 1pl, 2pl, 3pl or 4pl; auto is chosen "
                                       "from the number of subjects (2PL < 500, 3PL < 1000, else "
                                       "4PL)."),
        quadpts: int = typer.Option(61, "--quadpts", help="Quadrature nodes on [-6, 6]."),
        prior_c: str = typer.Option("auto", "--prior-c",
                                    help="Prior on c: auto (the default for the model and data size), "
                                         "none, or e.g. 'beta(5,17)', 'logitnorm(-1.4,1)'."),
        prior_a: str = typer.Option("auto", "--prior-a",
                                    help="Prior on a: auto, none, or e.g. 'lognorm(0,0.5)', 'norm(1,1)'."),
        prior_u: str = typer.Option("auto", "--prior-u",
                                    help="Prior on the 4PL's upper asymptote u: auto (the 4PL's "
                                         "default), none, or e.g. 'beta(17,5)'."),
        mirt_defaults: bool = typer.Option(False, "--mirt-defaults",
                                           help="mirt's defaults for parity: auto means 3PL, no priors."),
        partition_size: Optional[int] = typer.Option(None, "--partition-size",
                                                     help="Calibrate random partitions of at least N "
                                                          "items and link them (joint when absent)."),
        link: str = typer.Option("mean-sigma", "--link",
                                 help="Partition linking: mean-sigma | mean-mean."),
        filter_: Optional[bool] = typer.Option(None, "--filter/--no-filter", show_default=False,
                                               help="Psychometric item/subject filtering before "
                                                    "calibrating [default: as atlascat.calibrate]."),
        max_iter: int = typer.Option(1000, "--max-iter", help="EM iteration cap."),
        tol: float = typer.Option(1e-4, "--tol", help="Stop when the largest parameter change < TOL."),
        convergence: str = typer.Option("params", "--convergence",
                                        help="params (mirt's rule on parameters) | icc (largest "
                                             "change of any item curve)."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Seed (partition assignment)."),
        fmt: str = typer.Option("ours", "--format", help="Bank format: ours (a,b,c,u) | mirt (a1,d,g,u)."),
        summary: Optional[Path] = typer.Option(None, "--summary", help="Write a JSON summary here."),
        scores: Optional[Path] = typer.Option(None, "--scores",
                                              help="Write the subjects' EAP theta and SE (CSV)."),
        freq_column: Optional[str] = typer.Option(None, "--freq-column",
                                                  help="Column holding pattern frequencies (pattern data)."),
        normalize_ids: bool = typer.Option(False, "--normalize-ids",
                                           help="Strip R's 'X' from item ids (X514 -> 514)."),
        drop_empty: bool = typer.Option(False, "--drop-empty",
                                        help="Drop all-missing subjects/items instead of failing."),
        dtype: str = typer.Option("float64", "--dtype", help="E-step precision: float64 | float32."),
        device: str = typer.Option("cpu", "--device",
                                   help="Where the EM runs: cpu (NumPy) | cuda (GPU through "
                                        "PyTorch or CuPy, the package's 'gpu' extra)."),
        quiet: bool = quiet_option(),
    ):
        """Calibrate an IRT item bank (1PL-4PL) by marginal maximum likelihood (EM).

        Filters items and subjects first when asked (--filter/--no-filter; the default is the
        library's), fits all items jointly (or linked partitions).
        """
        import numpy as np
        import pandas as pd

        from ..errors import ConfigError
        from ..irt.bank import ItemBank
        from ..irt.calibrate import Calibrator

        if fmt not in ("ours", "mirt"):
            raise ConfigError(f"--format must be 'ours' or 'mirt', not {fmt!r}")
        if convergence not in ("params", "icc"):
            raise ConfigError(f"--convergence must be 'params' or 'icc', not {convergence!r}")
        output_file(output)
        output_file(summary, "--summary")
        output_file(scores, "--scores")
        lib_opts = {} if filter_ is None else {"filter": filter_}  # library default otherwise
        cal = Calibrator(model.lower(), quadpts=quadpts, prior_a=prior_a, prior_c=prior_c,
                         prior_u=prior_u, max_iter=max_iter, tol=tol, partition_size=partition_size, link=link,
                         dtype=dtype, random_state=seed, convergence=convergence,
                         mirt_defaults=mirt_defaults, device=device, **lib_opts)
        cal._check_settings()  # fail on bad settings before reading more or starting the bar
        rm = load_responses(responses, freq_column=freq_column, normalize_ids=normalize_ids,
                            on_empty="drop" if drop_empty else "error")
        import warnings

        from ..irt.defaults import DefaultsWarning, IdentificationWarning

        # the defaults' warnings are printed below from the result, once
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DefaultsWarning)
            warnings.simplefilter("ignore", IdentificationWarning)
            _fit(cal, rm, quiet, partition_size, max_iter)
        res = cal.result_
        out_bank = res.bank
        if res.model == "rasch":
            # the file is read on the N(0, 1) scale (score, fit, CAT): write the equivalent 1PL,
            # common slope sqrt(latent variance), not a = 1 with the variance left behind
            sd = float(np.sqrt(res.latent_variance))
            out_bank = ItemBank(res.bank.item_ids, np.full(len(res.bank), sd), res.bank.b / sd,
                                metadata=res.bank.metadata, model="1pl")
        out_bank.write(output, format=fmt)
        info = res.to_dict()
        info.update({"responses": str(responses), "output": str(output), "format": fmt})
        if summary is not None:
            summary.parent.mkdir(parents=True, exist_ok=True)
            summary.write_text(json.dumps(json_safe(info), indent=2, default=_jsonable))
        if scores is not None:
            df = pd.DataFrame({"subject_id": res.subject_ids.astype(str), "theta": res.theta,
                               "se": res.theta_se})
            scores.parent.mkdir(parents=True, exist_ok=True)
            df.to_csv(scores, index=False, float_format="%.10g")
        status = "converged" if res.converged else "[yellow]not converged (raise --max-iter)[/]"
        console.print(
            f"calibrated [bold]{len(res.bank)}[/] items ({res.model.upper()}) on "
            f"{_subjects(rm, res.subject_ids)}: log-likelihood {res.loglik:.3f}, "
            f"{res.n_iter} EM iterations, {status}, {res.seconds:.1f} s"
        )
        chosen = res.settings.get("defaults") if res.settings else None
        if chosen:
            console.print(f"model {chosen['model'].upper()} ({chosen['source']}): {chosen['reason']}")
            for msg in chosen.get("warnings", []):
                warn(msg)
        if res.filter_report is not None:
            rep = res.filter_report
            console.print(f"filtering dropped {rep.n_items_before - rep.n_items_after} item(s) and "
                          f"{rep.n_subjects_before - rep.n_subjects_after} subject(s)")
        if res.model == "rasch":
            console.print(f"latent variance {res.latent_variance:.4f}; bank written on the N(0, 1) "
                          f"scale as the equivalent 1PL (common slope {out_bank.a[0]:.4f})")
        if res.linking:
            As = np.array([lk["A"] for lk in res.linking])
            console.print(f"{len(res.linking)} partitions linked by {link}: A in "
                          f"[{As.min():.3f}, {As.max():.3f}]")
        console.print(f"wrote {output}" + (f" and {summary}" if summary else ""))


def _subjects(rm, kept) -> str:
    """The subjects the fit used (after filtering), counted in people when rows are patterns."""
    if rm.weights is None:
        return subjects_text(len(kept))
    import pandas as pd

    freq = pd.Series(rm.weights, index=[str(s) for s in rm.subject_ids])
    return subjects_text(len(kept), freq.loc[[str(s) for s in kept]].to_numpy())


def _fit(cal, rm, quiet: bool, partition_size, max_iter: int) -> None:
    """Fit with a progress bar over the EM iterations (of every partition) unless quiet; the bar
    ends at the iteration the fit stopped at, not at the cap."""
    if quiet:
        cal.fit(rm)
        return
    n_parts = 1
    if partition_size:
        n_parts = max(1, rm.n_items // int(partition_size))
    with progress_bar("EM", total=max_iter * n_parts) as advance:
        reached: dict = {}  # partition -> last iteration reported

        def on_iter(info):
            part, it = info.get("partition", 0), int(info["iteration"])
            if it > reached.get(part, 0):
                advance(it - reached.get(part, 0))
                reached[part] = it

        cal.callback = on_iter
        cal.fit(rm)
        advance(0, total=max(sum(reached.values()), 1))


def _jsonable(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
