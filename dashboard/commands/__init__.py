"""One module per ``quotaloop`` sub-command; each defines ``register(subparsers)`` and ``run(args) -> int``."""
