"""IRT core: item response functions, item banks, calibration, ability estimation, model fit."""
