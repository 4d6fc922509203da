"""``atlas calibrate RESPONSES -o BANK``: calibrate an item bank by marginal maximum likelihood."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import console, progress_bar


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        responses: Path = typer.Argument(..., exists=True, dir_okay=False,
                                         help="Response matrix: wide CSV/CSV.GZ/Parquet (subjects x items, "
                                              "blank = missing) or long format."),
        output: Path = typer.Option(..., "-o", "--output", help="Bank file to write (.csv or .parquet)."),
        model: str = typer.Option("3pl", "--model", help="rasch | 1pl | 2pl | 3pl | 4pl."),
        quadpts: int = typer.Option(61, "--quadpts", help="Quadrature nodes on [-6, 6]."),
        prior_c: Optional[str] = typer.Option(None, "--prior-c",
                                              help="Prior on c, e.g. 'beta(5,17)' or 'logitnorm(-1.4,1)'. "
                                                   "Off by default (mirt parity)."),
        prior_a: Optional[str] = typer.Option(None, "--prior-a",
                                              help="Prior on a, e.g. 'lognorm(0,0.5)' or 'norm(1,1)'."),
        partition_size: Optional[int] = typer.Option(None, "--partition-size",
                                                     help="Calibrate random partitions of at least N "
                                                          "items and link them (joint when absent)."),
        link: str = typer.Option("mean-sigma", "--link",
                                 help="Partition linking: mean-sigma | mean-mean."),
        no_filter: bool = typer.Option(False, "--no-filter",
                                       help="Skip psychometric item/subject filtering."),
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
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    ):
        """Calibrate an IRT item bank (1PL-4PL) by marginal maximum likelihood (EM).

        Filters first (--no-filter to skip), fits all items jointly (or linked partitions).
        """
        import numpy as np
        import pandas as pd

        from ..errors import ConfigError
        from ..irt.calibrate import Calibrator
        from ..responses import ResponseMatrix

        if fmt not in ("ours", "mirt"):
            raise ConfigError(f"--format must be 'ours' or 'mirt', not {fmt!r}")
        if convergence not in ("params", "icc"):
            raise ConfigError(f"--convergence must be 'params' or 'icc', not {convergence!r}")
        rm = ResponseMatrix.read(responses, freq_column=freq_column, normalize_ids=normalize_ids,
                                 on_empty="drop" if drop_empty else "error")
        cal = Calibrator(model.lower(), quadpts=quadpts, prior_a=prior_a, prior_c=prior_c,
                         max_iter=max_iter, tol=tol, partition_size=partition_size, link=link,
                         filter=not no_filter, dtype=dtype, random_state=seed,
                         convergence=convergence, device=device)
        cal._check_settings()  # fail on bad settings before reading more or starting the bar
        if quiet:
            cal.fit(rm)
        else:
            n_parts = 1
            if partition_size:
                n_parts = max(1, rm.n_items // int(partition_size))
            with progress_bar("EM", total=max_iter * n_parts) as advance:
                done = {"n": 0}

                def on_iter(info):
                    pos = info["partition"] * max_iter + info["iteration"]
                    if pos > done["n"]:
                        advance(pos - done["n"])
                        done["n"] = pos

                cal.callback = on_iter
                cal.fit(rm)
                advance(max_iter * n_parts - done["n"])
        res = cal.result_
        res.bank.write(output, format=fmt)
        info = res.to_dict()
        info.update({"responses": str(responses), "output": str(output), "format": fmt})
        if summary is not None:
            summary.parent.mkdir(parents=True, exist_ok=True)
            summary.write_text(json.dumps(info, indent=2, default=_jsonable))
        if scores is not None:
            df = pd.DataFrame({"subject_id": res.subject_ids.astype(str), "theta": res.theta,
                               "se": res.theta_se})
            scores.parent.mkdir(parents=True, exist_ok=True)
            df.to_csv(scores, index=False, float_format="%.10g")
        status = "converged" if res.converged else "[yellow]not converged (raise --max-iter)[/]"
        console.print(
            f"calibrated [bold]{len(res.bank)}[/] items ({res.model.upper()}) on "
            f"{len(res.subject_ids)} subjects: log-likelihood {res.loglik:.3f}, "
            f"{res.n_iter} EM iterations, {status}, {res.seconds:.1f} s"
        )
        if res.filter_report is not None:
            rep = res.filter_report
            console.print(f"filtering dropped {rep.n_items_before - rep.n_items_after} item(s) and "
                          f"{rep.n_subjects_before - rep.n_subjects_after} subject(s)")
        if res.dropped_items:
            console.print(f"left out {len(res.dropped_items)} item(s) with constant responses")
        if res.model == "rasch":
            console.print(f"latent variance {res.latent_variance:.4f}")
        if res.linking:
            As = np.array([lk["A"] for lk in res.linking])
            console.print(f"{len(res.linking)} partitions linked by {link}: A in "
                          f"[{As.min():.3f}, {As.max():.3f}]")
        console.print(f"wrote {output}" + (f" and {summary}" if summary else ""))


def _jsonable(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
