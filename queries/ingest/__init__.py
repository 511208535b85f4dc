"""Ingest scheduler exports into a store: the pipeline (``pipeline``: ``ingest``, ``parse_file``,
``detect_format``, ``IngestError``, ``Parsed``, ``FileSummary``), the registry of formats (``formats``: a name ->
its reader and detector) and one module per format. Adding a format: see ``formats``.

The pipeline's names are re-exported here, resolved on first use (PEP 562) instead of imported at the top: the
CLI reads ``formats`` when it builds its parser, and loading the pipeline there would load Polars, which costs
every ``quotaloop`` start about 0.4 s (0.2 s -> 0.65 s for ``build_parser``, measured) and comes before
``quotaloop ingest`` sets Polars' allocator, which must precede Polars' first import.
"""
from ..lazy import exports

_EXPORTS = {name: "pipeline" for name in
            ("FileSummary", "IngestError", "Parsed", "detect_format", "ingest", "last_instants", "parse_file")}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
