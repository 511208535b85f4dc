"""The calibration a what-if runs under: the knobs ``quotaloop validate --calibrate`` fitted to a store's log.

Where it comes from, first found wins:
1. an explicit file: ``--config-file`` (``simulate``, ``scenario``, ``validate``), the dashboard's
   ``calibration`` key / ``QUOTALOOP_CALIBRATION``;
2. ``STORE/calibration.json``, written there by ``quotaloop validate --calibrate --save`` (or copied there by
   hand), so the Fair share page, ``scenario --store`` and ``simulate --store`` replay the store's history under
   the configuration fitted to it without anyone passing it again; ``--no-calibration`` ignores this one.

Invariants: a found file that does not parse is a one-line ``ValueError`` naming the file and field (never
silently skipped: a what-if that quietly dropped its calibration would look trustworthy and not be); the knobs
are exactly ``engine.calibrate.read_config_file``'s; priority weights are applied only under the
``multifactor`` policy they were fitted for (``for_policy`` says which knobs it left out and why), because any
other policy refuses them.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

FILE_NAME = "calibration.json"
WEIGHTED_POLICY = "multifactor"  # the only policy that reads the priority weights


@dataclass(frozen=True)
class Calibration:
    path: Path
    knobs: dict                                   # SimConfig field -> value
    modeled: dict = field(default_factory=dict)   # policy / backfill the knobs were fitted under
    held_back: dict | None = None                 # {"baseline": {...}, "calibrated": {...}} overall figures
    discovered: bool = False                      # found beside the store rather than named explicitly

    def for_policy(self, policy: str) -> tuple[dict, list[str]]:
        """(knobs to apply under ``policy``, notes on what was left out)."""
        from engine.calibrate import WEIGHTS

        if policy == WEIGHTED_POLICY or not any(k in self.knobs for k in WEIGHTS):
            return dict(self.knobs), []
        kept = {k: v for k, v in self.knobs.items() if k not in WEIGHTS}
        return kept, [f"the calibrated priority weights apply to the {WEIGHTED_POLICY} policy only; "
                      f"they are left out under {policy}"]

    def describe(self) -> str:
        """One line: the knobs and, when the file has them, the held-back figures that justify them."""
        shown = []
        for k, v in sorted(self.knobs.items()):
            if k == "node_events":
                shown.append(f"{len(v)} inferred node drain(s)")
            elif k == "capacity_events":
                shown.append(f"{len(v)} inferred processor drain(s)")
            elif isinstance(v, float):
                shown.append(f"{k}={v:g}")
            else:
                shown.append(f"{k}={v}")
        modeled = "/".join(str(self.modeled[k]) for k in ("policy", "backfill") if self.modeled.get(k))
        text = f"calibrated knobs from {self.path.name}" + (f" (fitted under {modeled})" if modeled else "") + \
            ": " + (", ".join(shown) or "the engine's defaults fitted best")
        cal = (self.held_back or {}).get("calibrated")
        if cal:
            parts = []
            if cal.get("spearman") is not None:
                parts.append(f"Spearman {cal['spearman']:.2f}")
            for key, name in (("mean_rel_err", "mean"), ("p90_rel_err", "p90")):
                if cal.get(key) is not None:
                    parts.append(f"{name} wait {100 * cal[key]:+.0f} %")
            if parts:
                text += "; on the held-back part of the log: " + ", ".join(parts)
        return text


def beside(store) -> Path:
    """Where a store's own calibration lives."""
    return Path(store) / FILE_NAME


def load(path, *, discovered: bool = False) -> Calibration:
    """The calibration in ``path``; ValueError with one line naming the file (and field) when it is not one."""
    from engine.calibrate import read_config_file  # numpy and Polars: only when there is a file to read

    path = Path(path)
    knobs = read_config_file(path)  # the checks and messages of every knob live there
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    modeled = doc.get("modeled") if isinstance(doc.get("modeled"), dict) else {}
    held = doc.get("held_back") if isinstance(doc.get("held_back"), dict) else None
    return Calibration(path, knobs, modeled, held, discovered)


def resolve(store=None, explicit=None, *, ignore_store: bool = False) -> Calibration | None:
    """The calibration to apply: ``explicit`` if given, else the store's own file unless ``ignore_store``."""
    if explicit:
        return load(explicit)
    if store is None or ignore_store:
        return None
    path = beside(store)
    return load(path, discovered=True) if path.is_file() else None


def save(doc: dict, store) -> Path:
    """Write a ``validate --calibrate`` configuration as the store's own calibration, atomically (a reader never
    sees half a file), and return its path."""
    path = beside(store)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
