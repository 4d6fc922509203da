"""The package's data files (``data/``; sources and licences in ``data/README.md``). Nothing to
import here: what ships is found by name in :mod:`atlascat.catalogue` (``load_responses``,
``load_bank``, ``load_paper_bank``, ``load_score_link``, ...)."""
