"""The adaptive test on a bank folder (or any bank with a score link), in one call: what
``atlas simulate --bank DIR RESPONSES --design adaptive`` runs, and the settings ``atlas
evaluate`` runs it live with.

- :func:`adaptive_config`: the CAT's settings with the score link's floor / top and
  score-precision stops (:func:`atlascat.scorelink.with_link_stops`; the margin on the
  folder's own scale, :func:`atlascat.catalogue.bankref.bound_margin`) and the bank's own
  shortest test unless a minimum is given;
- :func:`simulate_adaptive`: that test for every examinee
  (:func:`atlascat.cat.simulate.simulate_cat`; recorded models each draw from their own
  generator, :func:`selection_generators`, as a live run of one with the same seed does), with
  the predicted score and its 95% interval in the result's ``persons``;
- :func:`replay_adaptive`: the same on a bank folder and recorded answers, as tables: the
  adaptive test's :func:`~atlascat.bankdir.predict.replay_predictor`;
- :func:`prediction_words`: what the predicted score of that test is of (a simulation's
  summary, :func:`atlascat.scorelink.frames.prediction_summary`);
- :func:`answering_bank`: the bank a simulated model answers the adaptive test from: on a
  folder of continuous scores (F1, ROUGE) each item's dispersion, as the folder's predictor
  draws them (the folder's bank has none: the test scores by the Bernoulli likelihood), so
  ``--thetas`` and ``simulate:THETA`` answer scores, not 0/1.
"""
from __future__ import annotations

__all__ = ["adaptive_config", "simulate_adaptive", "replay_adaptive", "selection_generators",
           "prediction_words", "answering_bank"]


def _resolve(bank, load: bool = True):
    """(ItemBank or None, BankFolder or None, ScoreLink or None) of a BankFolder, a BankRef, or
    what ``--bank`` takes (a bank folder's path, a bundled bank's name, a bank file); the bank
    loaded only with ``load``. The link is the one of the benchmark the bank measures
    (:meth:`~atlascat.catalogue.BankRef.score_link`, as ``atlas evaluate`` predicts by): a bank
    file whose ``benchmark`` column names a shipped benchmark has that benchmark's."""
    from ..catalogue.bankref import BankRef
    from .folder import BankFolder

    if isinstance(bank, BankFolder):
        return bank.bank, bank, bank.link
    ref = BankRef.from_option(bank, option="bank")
    return (ref.load() if load else None), ref.folder(), ref.usable_score_link()


def _config(link, folder, config, *, max_items, min_items, bound_stop, bound_margin):
    from ..cat.config import CATConfig
    from ..catalogue.bankref import bound_margin as margin_of

    config = CATConfig() if config is None else config
    if not isinstance(config, CATConfig):
        from ..errors import ConfigError

        raise ConfigError(f"config must be a CATConfig, got {type(config).__name__}")
    if link is None and bound_margin is not None:
        from ..errors import ConfigError

        raise ConfigError("bound_margin (CLI --bound-margin) sets the score link's floor / top "
                          "stop; this bank has no score link (a bank folder, a shipped bank or "
                          "a bank file naming a shipped benchmark has one): drop it")
    margin = margin_of(bound_margin, folder) if bound_stop else None  # checked with or without
    changes = {}
    if max_items is not None:
        changes["max_items"] = int(max_items)
    if min_items is not None:
        changes["min_items"] = int(min_items)
    elif max_items is not None:   # the default minimum, never above the maximum
        changes["min_items"] = min(config.stopping.min_items, max(int(max_items), 0))
    if changes:
        config = config.replace(**changes)
    if link is not None and bound_stop:
        from ..scorelink import with_link_stops

        config = with_link_stops(config, link.stop_settings(margin), min_items is not None)
    return config


def adaptive_config(bank, config=None, *, max_items: int | None = None,
                    min_items: int | None = None, bound_stop: bool = True,
                    bound_margin: float | None = None):
    """The CAT's settings (:class:`~atlascat.cat.config.CATConfig`) of the adaptive test on
    ``bank`` (a bank folder or its path, a bundled bank's name, a
    :class:`~atlascat.catalogue.BankRef`), as ``atlas simulate`` / ``atlas evaluate`` build
    them: ``config`` (default CATConfig()) with ``max_items`` / ``min_items`` when given (a
    ``max_items`` alone lowers the default minimum to it) and, with ``bound_stop`` and a score
    link, the link's floor / top and score-precision stops (``bound_margin``:
    ``--bound-margin``, on the folder's metric scale; None: 2% of the scale) and the bank's
    own shortest test when no ``min_items`` is given (never above ``max_items``). The link is
    the one of the benchmark the bank measures: a bank folder's, a bundled bank's, or a bank
    file's whose ``benchmark`` column names a bundled benchmark (that benchmark's); a plain
    bank file has none. The one place both commands build the test from."""
    _, folder, link = _resolve(bank, load=False)
    return _config(link, folder, config, max_items=max_items, min_items=min_items,
                   bound_stop=bound_stop, bound_margin=bound_margin)


def simulate_adaptive(bank, responses=None, config=None, *, thetas=None, subject_ids=None,
                      theta_ref=None, max_items: int | None = None,
                      min_items: int | None = None, seed: int = 0, bound_stop: bool = True,
                      bound_margin: float | None = None, batch_size: int = 1, progress=None):
    """The adaptive test of every examinee on ``bank`` (as :func:`adaptive_config`), scored by
    its score link: ``atlas simulate --bank BANK [RESPONSES] --design adaptive``.

    ``responses``: recorded answers to replay (a matrix file, read as ``atlas simulate`` reads
    it: a ``--score-range`` folder's scores mapped from its scale, or a ResponseMatrix /
    DataFrame on 0-1), or ``thetas`` (with ``subject_ids``): answers drawn from the bank's
    model; ``theta_ref``: reference thetas for the error columns. ``seed``: each model draws
    from its own Generator (:func:`selection_generators`), as a live run of it with the same
    seed does, on every kind of bank; with ``thetas`` model ID (default its row number) also
    answers as the live ``simulate:THETA:SEED`` with SEED its answer seed
    (:func:`atlascat.cat.answers.simulated_models`). ``batch_size``,
    ``progress``: as :func:`~atlascat.cat.simulate.simulate_cat`'s.

    Returns the :class:`~atlascat.cat.result.CATResult`; with a score link its ``persons`` carry
    :data:`~atlascat.bankdir.predict.PREDICTION_COLUMNS` after the test's columns: the
    predicted score with its 95% interval (a bank folder's on its metric's scale,
    :func:`~atlascat.bankdir.predict.predict_scores`; a bundled bank's the published
    leaderboard score; a bank file's whose ``benchmark`` column names a shipped benchmark:
    that benchmark's), the percentile, a flag and a warning. Without a link
    (a bank file of your own) it is the plain adaptive test."""
    import numpy as np

    from ..cat.simulate import simulate_cat

    item_bank, folder, link = _resolve(bank)
    config = _config(link, folder, config, max_items=max_items, min_items=min_items,
                     bound_stop=bound_stop, bound_margin=bound_margin)
    kwargs = {"thetas": thetas, "subject_ids": subject_ids, "theta_ref": theta_ref}
    from ..validation import check_seed

    rng = np.random.default_rng(check_seed(seed))
    if responses is not None:
        kwargs["responses"] = responses = _read(folder, responses)
        rng = selection_generators(seed, responses.subject_ids)   # as a live run's
    elif thetas is not None:   # each model answers as its live simulate:THETA:SEED
        from ..cat.answers import simulated_models

        ids = range(np.size(thetas)) if subject_ids is None else subject_ids
        rng, kwargs["answer_seeds"] = simulated_models(seed, ids)
        if folder is not None:   # continuous scores: drawn as such
            from ..irt.dispersion import bank_dispersion

            kwargs["dispersion"] = bank_dispersion(answering_bank(folder, item_bank))
    result = simulate_cat(item_bank, config, rng=rng, progress=progress,
                          batch_size=int(batch_size),
                          **{k: v for k, v in kwargs.items() if v is not None})
    if link is None:
        return result
    if folder is not None:   # the built bank's predicted score, on its metric's scale
        from .predict import predict_scores

        predicted = predict_scores(folder, result.persons, result.administered)
    else:                    # the published leaderboard score
        from ..scorelink import predict_frame

        predicted = predict_frame(link, result.persons, result.administered)
    for col in predicted.columns:
        result.insert_person_column(list(result.person_columns)[-1], col,
                                    predicted[col].to_numpy())
    return result


def prediction_words(bank) -> dict | None:
    """What :func:`simulate_adaptive`'s predicted score on ``bank`` is of, as its summary
    names it (:func:`atlascat.scorelink.frames.prediction_summary`): the words of a live run's
    prediction on the same bank (:meth:`~atlascat.catalogue.bankref.BankRef.prediction_words`:
    a bank folder's benchmark, metric and scale, "predicted <benchmark> score"; through a
    shipped score link the benchmark and ``population`` "leaderboard"); None without a link
    (no predicted score)."""
    from ..catalogue.bankref import BankRef
    from .folder import BankFolder

    if isinstance(bank, BankFolder):
        from .predict import folder_words

        return folder_words(bank)
    ref = bank if isinstance(bank, BankRef) else BankRef.from_option(bank, option="bank")
    if ref.kind != "dir" and ref.usable_score_link() is None:
        return None
    return ref.prediction_words()


def selection_generators(seed: int, subject_ids) -> list:
    """Each recorded model's own Generator of the adaptive test's random choices (the first
    item, the randomesque picks): :func:`~atlascat.predict.session.subject_generator` of
    ``seed`` and its id, what a live run of that model with ``seed`` draws from
    (:meth:`atlascat.live.service.LiveRun.start`), on every kind of bank. A model is then
    asked the same items replayed among any others as alone, and two models draw
    independently."""
    from ..predict.session import subject_generator

    return [subject_generator(seed, s) for s in subject_ids]


def _read(folder, responses):
    """Recorded answers as :func:`~atlascat.bankdir.predict.read_targets` reads them (a
    bundled bank's: a matrix file or name with ids normalized, blank rows kept)."""
    from pathlib import Path

    if folder is not None:
        from .predict import read_targets

        return read_targets(folder, responses)
    if isinstance(responses, (str, Path)):
        from ..catalogue.matrices import resolve_responses

        return resolve_responses(responses, normalize_ids=True, on_empty="keep")
    from ..responses import as_response_matrix

    return as_response_matrix(responses)


def replay_adaptive(folder, responses, config=None, *, max_items: int | None = None,
                    min_items: int | None = None, seed: int = 0, bound_stop: bool = True,
                    bound_margin: float | None = None, batch_size: int = 1,
                    selected: bool = False):
    """The bank folder's adaptive test (``folder``: a BankFolder or its path) on recorded
    answers (``responses``: a matrix file read as ``atlas simulate`` reads it, or a
    ResponseMatrix / DataFrame on 0-1), scored by its score link: ``atlas simulate --bank DIR
    RESPONSES --design adaptive`` (:func:`simulate_adaptive`; ``config``, ``max_items``,
    ``min_items``, ``bound_stop``, ``bound_margin`` as :func:`adaptive_config`). One row per
    target, as ``person_scores.csv``: ``subject_id``, ``theta``, ``se``, ``n_items``,
    ``stop_reason``, ..., and the predicted score with its 95% interval (``score``,
    ``score_lo``, ``score_hi``, on the metric's scale), ``percentile``, ``score_flag``,
    ``score_warning``. With ``selected``: (that frame, the items each target was asked, as
    ``selected_items.csv``: ``subject_id``, ``item_id``, ``order``, ``score`` (its recorded
    answer, on the metric's scale), ``theta``, ``se`` after it)."""
    from .predict import as_folder, to_metric_scale

    folder = as_folder(folder)
    result = simulate_adaptive(folder, responses, config, max_items=max_items,
                               min_items=min_items, seed=seed, bound_stop=bound_stop,
                               bound_margin=bound_margin, batch_size=batch_size)
    if not selected:
        return result.persons
    return result.persons, to_metric_scale(result.administered, folder, ["score"])


def answering_bank(folder, bank=None):
    """``bank`` (default the folder's; a BankFolder or its path) as a simulated model answers
    it: on a folder of continuous scores, with each item's dispersion phi_j in its
    ``dispersion`` column, so that its answers are Beta scores of mean P_j(theta) and variance
    phi_j P Q (:func:`atlascat.irt.dispersion.draw_scores`) as the source models' were, not
    0/1 coins. phi_j is the folder's predictor's (the dispersions its items carry, what
    ``simulate:THETA`` on the predictor draws with), else estimated from the source answers the
    folder keeps on its bank (:func:`atlascat.irt.dispersion.item_dispersion`); an item with
    neither: 1 (a coin). Only the answers: the adaptive test still scores ``bank`` by the
    Bernoulli likelihood, as the folder's link was fitted. ``bank`` itself when it has a
    dispersion already, the folder's scores are 0/1, or it keeps neither."""
    import numpy as np

    from ..irt.dispersion import bank_dispersion, with_dispersion
    from ..errors import BankFolderError
    from .predict import as_folder, continuous_scores, load_predictor

    folder = as_folder(folder)
    bank = folder.bank if bank is None else bank
    if bank_dispersion(bank) is not None or not continuous_scores(folder):
        return bank
    try:
        predictor = load_predictor(folder)
    except BankFolderError:          # lost: the adaptive test does without it (source answers)
        predictor = None
    phi = _predictor_dispersion(predictor)
    if phi is None:
        phi = _source_dispersion(folder)
    if not phi:
        return bank
    return with_dispersion(bank, np.array([phi.get(str(i), 1.0) for i in bank.item_ids]))


def _predictor_dispersion(predictor) -> dict | None:
    """{item id: phi} of a folder's predictor (None: none, or 0/1 answers)."""
    phi = None if predictor is None else getattr(predictor, "dispersion_", None)
    if phi is None:
        return None
    return dict(zip(map(str, predictor.item_ids_), map(float, phi)))


def _source_dispersion(folder) -> dict | None:
    """{item id: phi} estimated from the source answers the folder keeps, on its bank."""
    src = folder.source_answers()
    if src is None:
        return None
    import numpy as np

    from ..irt.dispersion import estimated_dispersion
    from ..responses import ResponseMatrix

    rm = ResponseMatrix(src.values, list(src.models), list(src.item_ids), on_empty="keep")
    y = rm.aligned_values(folder.bank.item_ids, extra="ignore")
    phi = estimated_dispersion(y, folder.bank)    # on the calibration's grid
    if phi is None:
        return None
    return {str(i): float(v) for i, v, seen in zip(folder.bank.item_ids, phi,
                                                   np.isfinite(y).any(0)) if seen}
