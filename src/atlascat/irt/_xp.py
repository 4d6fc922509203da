"""Former name of :mod:`atlascat.irt.arrays` (the array-namespace helpers), kept importable."""
from .arrays import *  # noqa: F401,F403
from .arrays import __all__  # noqa: F401
