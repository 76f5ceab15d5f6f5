"""How many rounds an interleaved A/B (``iorig ab``) runs, apart from its
statistics (``ab.py``): the command line shows these bounds, and builds its
options at every start, without importing numpy."""

MIN_AUTO_ROUNDS = 3  # auto never decides on fewer (2 degrees of freedom are too few)
MAX_ROUNDS = 10
