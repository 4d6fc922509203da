"""Computerized adaptive testing, laid out by stage as catsim is; the engine composes the parts.

- :mod:`.config`: :class:`~atlascat.cat.config.CATConfig`, made of five value objects that
  validate themselves: ``Estimation`` (EAP prior, quadrature, SE definition), ``Selection``
  (first item, criterion, randomesque), ``Stopping`` (min / max items, SE and other stops,
  your own rules), ``Exposure`` and ``Content``;
- :mod:`.selection`: criteria scoring every item for every examinee
  (:class:`~atlascat.cat.selection.SelectionCriterion`: maximum Fisher information, per cost,
  Kullback-Leibler interval, a-stratified, random; subclass it for your own);
- :mod:`.stopping`: stop rules (:class:`~atlascat.cat.stopping.StopRule`: SE, reliability,
  minimum information, floor / ceiling of a score link, cost, budget; subclass it);
- :mod:`.exposure`, :mod:`.exposure_calibration`, :mod:`.content`: exposure control
  (Sympson-Hetter, item eligibility) and content balancing;
- :mod:`.session`: :class:`~atlascat.cat.session.CATSession`, one examinee step by step
  (``next_item`` / ``record`` / ``skip``, ``to_dict`` / ``from_dict``);
- :mod:`.simulate`: :func:`~atlascat.cat.simulate.simulate_cat`, many examinees at once on
  replayed answers, true thetas or a callable, returning a :class:`~atlascat.cat.result.CATResult`
  (:mod:`.result`; :mod:`.security` for exposure and overlap);
- :mod:`.ordinal`: the same test on graded / GPCM banks (``OrdinalCATSession``);
  :mod:`.multidim`: on a K-dimensional bank; :mod:`.rounds`: k items per round.

Randomness is always an injected ``rng`` (a seed or a ``numpy.random.Generator``, one child
stream per examinee: :mod:`.generators`). ``docs/cat.md`` shows a selection criterion and a stop
rule of one's own in use. The names are imported from their modules (``atlascat`` re-exports
``CATConfig``, ``CATSession``, ``OrdinalCATSession``, ``CATResult``, ``simulate_cat``).
"""
