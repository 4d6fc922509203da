"""``atlas score RESPONSES --bank BANK``: theta and SE for every subject (EAP, WLE, MAP, ML),
raw accuracy, and optionally p-IRT / gp-IRT reconstructed accuracy."""
from __future__ import annotations

from pathlib import Path

import typer

from ._common import (RESPONSES_HELP, align_items, bank_option_help, console, err_console,
                      load_bank, load_responses, output_file, print_frame, subjects_text)

METHODS = ("eap", "wle", "map", "ml")


def _with_folder_prediction(df, bank_dir, rm, bk):
    """``df`` with a bank folder's predicted score columns (``score``, ``_lo``,
    ``_hi``, ...) from each subject's theta, SE and answers (:func:`atlascat.bankdir.predict_scores`)."""
    import numpy as np
    import pandas as pd

    from ..bankdir import load_bank_dir, predict_scores

    y = rm.aligned_values(bk.item_ids)
    r, c = np.nonzero(np.isfinite(y))
    administered = pd.DataFrame({"subject_id": np.asarray(rm.subject_ids, dtype=object)[r],
                                 "item_id": np.asarray(bk.item_ids, dtype=object)[c],
                                 "score": y[r, c]})
    pred = predict_scores(load_bank_dir(bank_dir), df[["subject_id", "theta", "se"]],
                          administered)
    return pd.concat([df.reset_index(drop=True), pred], axis=1)


def register(app: typer.Typer) -> None:
    @app.command("score")
    def score(
        responses: str = typer.Argument(..., metavar="RESPONSES", help=RESPONSES_HELP),
        bank: str = typer.Option(..., "--bank", "-b", help=bank_option_help()),
        method: str = typer.Option("eap", "--method", "-m", help="Scoring method: eap, wle, map or ml."),
        output: Path = typer.Option(None, "--output", "-o",
                                    help="Write the scores to this CSV (printed when absent)."),
        freq_column: str = typer.Option(None, "--freq-column",
                                        help="Column with pattern frequencies (e.g. freq)."),
        normalize_ids: bool = typer.Option(False, "--normalize-ids",
                                           help="Strip R's 'X' prefix from item ids (X514 -> 514)."),
        prior_mean: float = typer.Option(0.0, "--prior-mean", help="EAP/MAP normal prior mean."),
        prior_sd: float = typer.Option(1.0, "--prior-sd", help="EAP/MAP normal prior SD (> 0)."),
        quadpts: int = typer.Option(61, "--quadpts", help="EAP quadrature nodes on [-6, 6]."),
        reconstruct: str = typer.Option("none", "--reconstruct",
                                        help="none, pirt or gpirt: add reconstructed accuracy."),
        lam: float = typer.Option(None, "--lambda", help="gp-IRT weight in [0, 1]."),
        calibration: str = typer.Option(None, "--calibration",
                                        help="Full responses of calibration models (file or "
                                             "bundled name): estimate the gp-IRT lambda from them "
                                             "(instead of --lambda)."),
        extra_items: str = typer.Option("ignore", "--extra-items",
                                        help="ignore (with a note) or error: response items "
                                             "missing from the bank."),
        seed: int = typer.Option(0, "--seed", help="Seed for the gp-IRT lambda estimate."),
        device: str = typer.Option("cpu", "--device",
                                   help="Where EAP runs: cpu (NumPy) | cuda (GPU through "
                                        "PyTorch or CuPy, the package's 'gpu' extra)."),
    ):
        """Score every subject: theta, SE, items answered, raw and reconstructed accuracy.

        Columns: subject_id, theta, se, n_items, accuracy, flag [, freq] [, accuracy_pirt]
        [, accuracy_gpirt]. ML gives +-inf (flag perfect/zero) where no finite maximum exists.
        """
        import numpy as np

        from ..errors import ConfigError
        from ..studies.reconstruction import (
            estimate_gpirt_lambda,
            reconstruct_accuracy,
        )
        from ..irt.ability import estimate_ability

        method = method.lower()
        if method not in METHODS:
            raise ConfigError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
        if reconstruct not in ("none", "pirt", "gpirt"):
            raise ConfigError(f"--reconstruct must be none, pirt or gpirt, got {reconstruct!r}")
        if extra_items not in ("ignore", "error"):
            raise ConfigError(f"--extra-items must be ignore or error, got {extra_items!r}")
        from ..validation import check_finite, check_positive

        check_finite(prior_mean, "--prior-mean")
        check_positive(prior_sd, "--prior-sd")
        if lam is not None and not 0.0 <= check_finite(lam, "--lambda") <= 1.0:
            raise ConfigError(f"--lambda must be in [0, 1], got {lam}")
        output = output_file(output)
        bk = load_bank(bank, normalize_ids)
        rm = load_responses(responses, freq_column=freq_column, normalize_ids=normalize_ids)
        rm, bk = align_items(rm, bk, extra_items)
        df = estimate_ability(rm, bk, method, prior_mean=prior_mean, prior_sd=prior_sd,
                              quadpts=quadpts, device=device)
        y = rm.aligned_values(bk.item_ids)
        obs = ~np.isnan(y)
        with np.errstate(invalid="ignore", divide="ignore"):
            df.insert(4, "accuracy", np.where(obs, y, 0.0).sum(1) / obs.sum(1))
        if rm.weights is not None:
            df["freq"] = rm.weights
        if reconstruct != "none":
            if reconstruct == "gpirt" and lam is None:
                if calibration is None:
                    raise ConfigError("--reconstruct gpirt needs --lambda or --calibration "
                                      "(full responses to estimate lambda from)")
                cal_rm = load_responses(calibration, normalize_ids=normalize_ids,
                                        option="--calibration")
                cal, _ = align_items(cal_rm, bk, "ignore")
                n_adm = max(1, int(np.median(obs.sum(1))))
                est = estimate_gpirt_lambda(cal, bk, n_adm, rng=np.random.default_rng(seed))
                lam = est.lam
                err_console.print(f"gp-IRT lambda for {n_adm} items, estimated on "
                                  f"{Path(calibration).name}: {lam:.3f}")
            rec = reconstruct_accuracy(rm, bk, theta=np.clip(df["theta"].to_numpy(), -50, 50),
                                       lam=lam if reconstruct == "gpirt" else None)
            df["accuracy_pirt"] = rec["accuracy_pirt"].to_numpy()
            if reconstruct == "gpirt":
                df["accuracy_gpirt"] = rec["accuracy_gpirt"].to_numpy()
        from ..bankdir import is_bank_dir

        if is_bank_dir(bank):  # a bank folder: its predicted score with the 95% interval
            df = _with_folder_prediction(df, bank, rm, bk)
        if output is not None:
            from ..validation import write_guard

            with write_guard(output):
                output.parent.mkdir(parents=True, exist_ok=True)
                df.to_csv(output, index=False, float_format="%.8g")
            console.print(f"wrote {len(df)} scores ({method}) to {output}")
        else:
            print_frame(df, title=f"theta by {method.upper()} ({len(bk)} bank items)")
        finite = np.isfinite(df["se"].to_numpy(float))
        med = f"{np.median(df['se'][finite]):.4f}" if finite.any() else "n/a"
        console.print(f"{subjects_text(len(df), rm.weights)}, median SE {med}"
                      + (f", {int((~finite).sum())} non-finite (ML, or no items)"
                         if (~finite).any() else ""))
