"""What ``atlas calibrate`` prints about a fit's information criteria and standard errors
(binary and ordinal models alike)."""
from __future__ import annotations

from ._common import console


def print_criteria(res) -> None:
    """The information criteria of a calibration and where its standard errors went."""
    ic = res.information_criteria()
    console.print(f"AIC {ic['aic']:.3f}, BIC {ic['bic']:.3f}, SABIC {ic['sabic']:.3f}, "
                  f"HQ {ic['hq']:.3f} ({ic['n_parameters']} parameters, "
                  f"{ic['n_observations']:g} subjects)"
                  + ("; continuous scores: a quasi-likelihood's, not for comparing models"
                     if (res.settings or {}).get("scores") == "continuous" else ""))
    g2 = getattr(res, "g2", None)
    if g2 and g2.get("g2_p") is not None:   # mirt's print(mod): G2 on the pattern table
        sparse = g2["g2_df"] >= ic["n_observations"]   # more cells than subjects: p near 1
        console.print(f"G2 ({g2['g2_df']:.0f}) = {g2['g2']:.3f}, p = {g2['g2_p']:.4g}, "
                      f"RMSEA = {g2['g2_rmsea']:.3f} (the full pattern table, as mirt's "
                      "print(mod)" + ("; sparse, more cells than subjects: p says nothing, "
                                      "read M2 in atlas fit)" if sparse else "; M2: atlas fit)"),
                      highlight=False)
    if res.se is not None:
        kind = "posterior-mode " if res.se.posterior_mode else ""
        console.print(f"standard errors from the {kind}observed information (Oakes): "
                      "<parameter>_se columns" + _shared_se(res))


def _shared_se(res) -> str:
    """The SE of the one parameter every item shares: a Rasch fit's latent variance, a 1PL's
    common slope (the 1PL is fitted as the Rasch model; its slope is sqrt(variance))."""
    if res.se.latent_variance is None:
        return ""
    if res.model == "1pl":
        a1 = res.standard_errors("mirt", scale="standard")["a1_se"].iloc[0]
        return f"; common slope SE {a1:.4f} (a1_se)"
    return f"; latent variance SE {res.se.latent_variance_se:.4f}"
