"""``python -m dashboard.cli``: the same as the ``quotaloop`` script (the router stays ``dashboard.cli``, so the
sub-commands and the router share one ``UserError``)."""
import sys

from . import main

sys.exit(main())
