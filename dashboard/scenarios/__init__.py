"""What-if scenarios over a replayed history and the "why does my team get less?" explanation.

``spec`` (the named kinds and their parameters), ``transforms`` (what each kind changes in the workload or the
budget tree), ``runner`` (baseline and scenario runs through ``engine.simulate``, measured alike, written out by
``quotaloop scenario``), ``explain`` (one team's shortfall cause by cause, on logs or a simulation). Pure: no
Streamlit; ``dashboard.data`` caches the runs for the Fair share page.
"""
