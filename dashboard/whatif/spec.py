"""The one scenario model: ``ScenarioSpec`` = a registered kind, its parameters, and the baseline it changes.

Every scenario replays the same history twice: the *baseline* (the budget file as it is, the baseline policy
``policy`` and backfill ``backfill``, the log's min runtimes and requests) and the *scenario* (the kind's
change, ``dashboard.whatif.kind``; the kinds and their parameters are in ``registry.KINDS``, one module each
under ``kinds/``). Both runs use the same seed, so a result is reproducible from ``ScenarioSpec.to_dict()``
alone (with the same store window). Units: seconds, GPUs and fractions inside; a UI converts hours at its edge.

With a warm start, every kind leaves the jobs that started before the window start as logged (requests,
allocation, min runtime: ``transforms.as_logged_before``); only the jobs the window simulates change.

``sim_knobs``: calibrated engine settings (what ``engine.calibrate.read_config_file`` returns: the scheduler cycle,
its scope, the reservation depth, ...; ``quotaloop scenario --config-file``) applied to the baseline's configuration, and so to the scenario's,
which the kind then changes; empty = the engine's defaults.

Invariants: ``ScenarioSpec`` is frozen and hashable with a canonical form (dicts become sorted tuples,
``params.canon``), so equal settings are equal however they were produced and hit the same cached run;
``make`` fills every parameter from the kind's defaults and rejects unknown kinds and parameters with one line.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.backfill import BACKFILLS
from engine.policies import POLICIES

from . import registry
from .params import ScenarioError, canon, one_of, plain


@dataclass(frozen=True)
class ScenarioSpec:
    kind: str
    params: tuple = ()
    policy: str = "fairshare"
    backfill: str = "easy"
    seed: int = 0
    sim_knobs: tuple = ()

    @classmethod
    def make(cls, kind: str, *, policy: str = "fairshare", backfill: str = "easy", seed: int = 0,
             sim_knobs: dict | None = None, **params) -> "ScenarioSpec":
        if kind not in registry.KINDS:
            raise ScenarioError(f"unknown scenario {kind!r}; known: {', '.join(registry.KINDS)}")
        k = registry.KINDS[kind]
        unknown = sorted(set(params) - set(k.defaults))
        if unknown:
            raise ScenarioError(f"scenario {kind}: unknown parameter(s) {', '.join(unknown)}; it takes: "
                                f"{', '.join(k.defaults)}")
        one_of("policy", policy, POLICIES)
        one_of("backfill", backfill, BACKFILLS)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ScenarioError(f"seed: must be an integer >= 0, got {seed!r}")
        full = {**k.defaults, **params}
        k.check(full)
        return cls(kind, canon(full), policy, backfill, seed, _knobs(sim_knobs or {}))

    @property
    def values(self) -> dict:
        return {k: plain(v) for k, v in self.params}

    @property
    def label(self) -> str:
        return registry.KINDS[self.kind].label

    def to_dict(self) -> dict:
        """Everything that produced a result (with the window and the budget file it ran on)."""
        out = {"kind": self.kind, "policy": self.policy, "backfill": self.backfill, "seed": self.seed,
               "params": self.values}
        if self.sim_knobs:  # without calibrated knobs the parameters stay as they always were
            out["config"] = dict(self.sim_knobs)
        return out

    def describe(self) -> str:
        what = registry.KINDS[self.kind].describe(self.values, self)
        knobs = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}" for k, v in self.sim_knobs)
        return f"{what} · baseline {self.policy}/{self.backfill}" + (f" calibrated{knobs}" if knobs else "") + \
            f" · seed {self.seed}"


# the SimConfig fields a spec sets itself (the baseline it describes, the window); every other field may be a knob
_OWN_FIELDS = {"policy", "backfill", "budgets", "quota", "seed", "warm_start", "window_end"}


def _knobs(knobs: dict) -> tuple:
    """Calibrated knobs as a sorted tuple of hashable values (equal settings hit the same cached run). Any
    ``engine.SimConfig`` field the spec does not set itself is accepted, so a knob ``engine.calibrate`` learns to
    fit (and ``read_config_file`` returns) needs no change here; anything else is rejected with one line."""
    import dataclasses

    from engine import SimConfig

    allowed = {f.name for f in dataclasses.fields(SimConfig)} - _OWN_FIELDS
    unknown = sorted(set(knobs) - allowed)
    if unknown:
        raise ScenarioError(f"sim_knobs: {', '.join(unknown)}: not a simulator setting a calibration can fix")
    return tuple(sorted((k, _frozen(v)) for k, v in knobs.items()))


def _frozen(v):
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v
