"""Bank folders: build a bank from your own results, read it back everywhere ``--bank`` goes.

- :func:`build_bank` (``atlas build-bank``): a response matrix or lm-evaluation-harness
  sample logs -> a calibrated bank with each item's logged requests, a score link and a
  manifest, written as a folder (:mod:`atlascat.bankdir.builder`);
- :func:`load_bank_dir` -> :class:`BankFolder` (bank, link, requests, manifest, extra files;
  :mod:`atlascat.bankdir.folder`);
- :func:`read_sample_logs`: sample logs with every item's exact requests and scoring rule
  (:mod:`atlascat.bankdir.samplelogs`);
- :func:`predict_scores`: the predicted score of a model tested on a folder, with its 95%
  interval (:mod:`atlascat.bankdir.predict`);
- :func:`simulated_sample_logs`: the logs of simulated models made from one real sample log,
  to try the path before running the harness on 20 models (:mod:`atlascat.bankdir.simlogs`).
"""
from .builder import MIN_MODELS, build_bank, fit_link, read_scores
from .folder import BankFolder, is_bank_dir, load_bank_dir, write_bank_dir
from .predict import (PREDICTION_COLUMNS, PREDICTOR_FILE, PREDICTOR_ITEMS_FILE, load_predictor,
                      load_predictor_items, predict_scores, replay_predictor)
from .samplelogs import LoggedItem, SampleLogs, parse_arguments, read_sample_logs
from .simlogs import simulated_sample_logs

__all__ = ["build_bank", "fit_link", "read_scores", "MIN_MODELS", "BankFolder", "is_bank_dir",
           "load_bank_dir", "write_bank_dir", "predict_scores", "PREDICTION_COLUMNS",
           "replay_predictor", "load_predictor", "load_predictor_items", "PREDICTOR_FILE",
           "PREDICTOR_ITEMS_FILE",
           "read_sample_logs", "SampleLogs", "LoggedItem", "parse_arguments",
           "simulated_sample_logs"]
