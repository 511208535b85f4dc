"""The what-if service: scenarios over a replayed history and the "why does my team get less?" explanation.

Used by the Fair share page (through ``dashboard.data``'s caches), ``quotaloop scenario`` and the report; it
never imports Streamlit. Rooms:

- ``spec``: ``ScenarioSpec``, the one scenario model (a kind, its parameters in seconds / GPUs / fractions,
  the baseline policy, backfill and seed); ``params``: canonical parameter values and their checks.
- ``kind``: the scenario-kind seam (``Kind``, ``Change``); ``kinds/``: one module per kind (shares, backfill,
  min_runtime, rightsize, quota_loop, drains, custom); ``registry``: the one name -> kind registry that the CLI's
  choices, the page's kind picker and the runner read. A new kind = one module + one registry line.
- ``loader``: the one store -> engine-input loader (the ``replay_jobs`` query, then ``workload``).
- ``runner``: baseline and scenario runs through ``engine.simulate``, measured alike, written out;
  ``transforms``: what the kinds change in a workload or a budget tree; ``budgets``: the tree as the forms see
  it; ``frames``: comparison frames; ``explain``: one team's shortfall cause by cause; ``fidelity``: the
  baseline's fidelity against the log and which deltas are inside that error; ``calibration``: the knobs a store's
  ``validate --calibrate --save`` fitted, which every replay of that store applies unless told otherwise.
"""
