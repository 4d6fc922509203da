"""Which items, or which comparisons, to ask next: test design beyond one adaptive test.

- :mod:`.optimal`: fixed forms of ``k`` items maximizing D-, A- or E-optimality over a theta
  distribution (:func:`~atlascat.design.optimal.optimal_form`,
  :func:`~atlascat.design.optimal.form_criterion`,
  :func:`~atlascat.design.optimal.random_form_baseline`); on 0/1, ordinal and
  multidimensional banks;
- :mod:`.bradley_terry`: Bradley-Terry ratings from paired comparisons with ties
  (:class:`~atlascat.design.bradley_terry.BradleyTerry`, scikit-learn style ``fit``);
- :mod:`.arena`: adaptive matchmaking, the pairs worth comparing next
  (:func:`~atlascat.design.arena.schedule`, :func:`~atlascat.design.arena.compare_schedulers`).

Formulas and references are in each module's docstring; ``docs/design.md`` shows them in use.
"""
