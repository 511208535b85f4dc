"""One module per scenario kind (``dashboard.whatif.kind.Kind``), each exporting ``KIND``; the registry
(``dashboard.whatif.registry``) lists them."""
