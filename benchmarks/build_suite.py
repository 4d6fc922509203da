"""Write the bundled suite ``datasets/data/suites/openllm-v1.json`` (members + joint prior).

The prior (:func:`atlascat.suite.fit_prior`) is fitted on the shipped banks' calibration
population (``population_matrix(bench, population="union")``, every leaderboard model with
answers; MMLU: dense) with the published scores for the residual correlation. Run::

    PYTHONPATH=src python benchmarks/build_suite.py
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from atlascat.live.build_bank import BENCHMARKS, load_published_scores, population_matrix
from atlascat.suite import Suite, SuiteMember, fit_joint_link, fit_prior
from atlascat.catalogue.suites import SUITES_DIR

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "openllm"
DESCRIPTION = ("Open LLM Leaderboard v1: ARC (25-shot), HellaSwag (10-shot), MMLU (5-shot), "
               "TruthfulQA (0-shot, mc2), WinoGrande (5-shot), GSM8K (5-shot); the aggregate "
               "is the mean of the six published scores, as the leaderboard defined it.")


def calibration_data(benches, data=DATA):
    """Per benchmark: the whole population's answers (models with a published score) and the
    published scores (0-1)."""
    responses, scores = {}, {}
    for b in benches:
        rm = population_matrix(b, data / "items", population="union", data_dir=data)
        s = load_published_scores(data / "leaderboard_scores.csv.gz", b)
        keep = np.isfinite(s.reindex(rm.subject_ids.astype(str)).to_numpy(float))
        responses[b], scores[b] = rm.subset(subjects=keep), s
    return responses, scores


def openllm_suite(prior=None, members=None) -> Suite:
    members = members or [SuiteMember(b, b, 1.0 / len(BENCHMARKS)) for b in BENCHMARKS]
    return Suite("openllm-v1", members, prior, DESCRIPTION,
                 {"population": "union", "source": "benchmarks/build_suite.py"})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(SUITES_DIR / "openllm-v1.json"))
    ap.add_argument("--joint-link", action="store_true",
                    help="also fit the joint link (the suite test replayed on the calibration "
                         "models with all six scores; a few minutes)")
    ap.add_argument("--no-answer-stacking", action="store_true",
                    help="the joint link without its answer stacking")
    ap.add_argument("--no-neighbours", action="store_true",
                    help="the joint link without its neighbour correction")
    args = ap.parse_args(argv)
    suite = openllm_suite().resolved()
    responses, scores = calibration_data(suite.names)
    prior = fit_prior(suite, responses, scores)
    out = openllm_suite(prior)
    if args.joint_link:
        out = out.replace(joint_link=fit_joint_link(suite.replace(prior=prior), responses,
                                                    scores, answers=not args.no_answer_stacking,
                                                    neighbours=not args.no_neighbours))
    print(out.write(args.output))
    print(np.round(prior.mean, 2), "\n", np.round(prior.cov, 2), "\n", np.round(prior.resid_corr, 2))


if __name__ == "__main__":
    main()
