"""IRT core: item response functions, item banks, calibration, ability estimation, model fit.

- :mod:`.models` (1PL-4PL) and :mod:`.polytomous` (graded, GPCM): the item response functions,
  with their formulas and references;
- :mod:`.bank`: :class:`~atlascat.irt.bank.ItemBank`; :mod:`.polybank`:
  :class:`~atlascat.irt.polybank.PolyBank` (ordinal items); :mod:`.multidim`: the M2PL, with
  :mod:`.rotation` (varimax, oblimin, geomin: mirt's rotated loadings);
- :mod:`.calibrate`: :func:`~atlascat.irt.calibrate.calibrate` and the scikit-learn style
  :class:`~atlascat.irt.calibrate.Calibrator` (MML-EM as mirt; the result:
  :class:`~atlascat.irt.result.CalibrationResult`), with :mod:`.se` (standard errors),
  :mod:`.compare` (AIC, BIC, ``anova``), :mod:`.priors`, :mod:`.defaults`, :mod:`.linking`;
- :mod:`.ability`: :func:`~atlascat.irt.ability.estimate_ability` (EAP, MAP, ML, WLE);
  :mod:`.polyscore` on ordinal banks; :mod:`.testinfo`: item and test information;
- :mod:`.fit`: M2, S-X2, person fit, Q3; :mod:`.polyfitstats` on ordinal banks;
  :mod:`.dimensionality`: whether the items measure one thing.

The other modules are the EM's pieces (:mod:`.estep`, :mod:`.mstep`, :mod:`.em`, ...), each
documented where it is defined.
"""
