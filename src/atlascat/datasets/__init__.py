"""Moved: what ships with the package is found by name in :mod:`atlascat.catalogue`; this
folder keeps the data files (``data/``, sources and licences in ``data/README.md``).

The old names keep working, with a DeprecationWarning. ``load_bank`` here still returns
the ATLAS paper's published bank (``load_bank("hellaswag")`` the paper's 5,600 items): it is
:func:`atlascat.catalogue.load_paper_bank`; :func:`atlascat.catalogue.load_bank` takes the
CLI's names (``"hellaswag"`` our content bank, ``"paper-hellaswag"`` the paper's).
"""
from .._moved import moved

_NAMES = ("RESPONSE_BENCHMARKS", "BANK_BENCHMARKS", "CONTENT_BENCHMARKS", "PAPER_PREFIX",
          "data_path", "load_responses", "load_test_thetas", "load_test_accuracy",
          "load_m2_partitions", "load_items", "bank_names", "is_bundled_name",
          "content_bank_path", "resolve_bank", "resolve_responses")
__getattr__ = moved(__name__, namespace=globals(), new_homes={**{n: "atlascat.catalogue" for n in _NAMES},
                               "load_bank": "atlascat.catalogue:load_paper_bank"})
__all__ = [*_NAMES, "load_bank"]
