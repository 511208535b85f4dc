"""The sample cluster's organisation and hardware: org tree, users with habits, node layout.

Invariants:
- 15 teams in a 3-level tree ``acme/<group>/<team>``; every user has one home team, a few also a second one.
- A user's habits (request inflation, GPU efficiency, walltime padding, parking) are drawn once here and
  drive every job of that user, so per-user waste rankings have a cause that ``ground_truth.json`` names.
- Node layout per 128 GPU nodes: 64 h100 (112 CPUs, 2 TiB), 48 a100 (128 CPUs, 1 TiB), 16 l40s
  (96 CPUs, 768 GiB), plus CPU-only nodes; ``--nodes`` scales the three GPU pools proportionally.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..store.units import GIB

ORG = "acme"

# group -> teams; the GPU-class profile of each team (debug, interactive, eval, training weights),
# its dataprep (CPU-only) affinity and its demand relative to its budget share. Demand multipliers are
# deliberately uneven: research/language asks far more than its share, platform/infra far less, so
# entitlement flows between siblings in the budget views.
TEAMS: dict[str, dict[str, dict]] = {
    "research": {
        "vision": dict(profile="research", dataprep=1.0, demand=1.2),
        "language": dict(profile="research", dataprep=1.2, demand=2.0),
        "speech": dict(profile="research", dataprep=0.8, demand=0.7),
        "multimodal": dict(profile="research", dataprep=1.0, demand=1.3),
        "rl": dict(profile="research", dataprep=0.3, demand=0.9),
    },
    "product": {
        "search": dict(profile="product", dataprep=1.0, demand=0.8),
        "recsys": dict(profile="product", dataprep=1.5, demand=1.0),
        "assistant": dict(profile="product", dataprep=0.8, demand=1.4),
        "safety": dict(profile="eval", dataprep=0.6, demand=0.8),
        "ads": dict(profile="product", dataprep=1.2, demand=0.6),
    },
    "platform": {
        "data": dict(profile="product", dataprep=4.0, demand=0.5),
        "evals": dict(profile="eval", dataprep=0.5, demand=1.0),
        "infra": dict(profile="debug", dataprep=0.5, demand=0.3),
        "perf": dict(profile="debug", dataprep=0.3, demand=0.5),
        "tools": dict(profile="product", dataprep=1.0, demand=0.4),
    },
}

# Budget shares (relative weights among siblings); sample_data/budgets.toml carries the same numbers.
GROUP_SHARES = {"research": 50, "product": 30, "platform": 20}
TEAM_SHARES = {
    "research": {"vision": 25, "language": 35, "speech": 10, "multimodal": 20, "rl": 10},
    "product": {"search": 20, "recsys": 25, "assistant": 30, "safety": 10, "ads": 15},
    "platform": {"data": 20, "evals": 30, "infra": 15, "perf": 20, "tools": 15},
}

# Per-team min-runtime overrides (class -> seconds), as in sample_data/budgets.toml.
MIN_RUNTIME_OVERRIDES = {"product/assistant": {"interactive": 1800}, "platform/evals": {"eval": 7200}}

TEAM_SIZES = (16, 18, 9, 12, 8, 10, 11, 13, 7, 9, 8, 10, 6, 7, 6)  # sums to 150

GPU_CLASSES = ("debug", "interactive", "eval", "training")
# P(class | team profile) for GPU jobs, in GPU_CLASSES order.
PROFILES = {
    "research": (0.34, 0.09, 0.15, 0.42),
    "product": (0.40, 0.10, 0.22, 0.28),
    "eval": (0.35, 0.08, 0.45, 0.12),
    "debug": (0.55, 0.15, 0.15, 0.15),
}

# Waste habits: (share of users, cpu/mem inflation median, GPU util in steady training, walltime padding).
# "right-sizer" asks roughly what it uses; "hoarder" asks 64 CPUs to use 6.
HABITS = {
    "right-sizer": (0.15, 1.15, 0.88, 1.15),
    "typical": (0.58, 2.0, 0.68, 1.4),
    "over-requester": (0.20, 5.0, 0.50, 2.0),
    "hoarder": (0.07, 10.0, 0.30, 3.0),
}

FIRST = ("alex ana ben carla dan eva femi gita hugo ines jon kai lena marc nina omar pia quinn raj sara "
         "tom uma vic wei xena yuri zoe amir bea chen dina emil fay gus hana ivo jade kofi lia milo").split()
LAST = ("smith garcia muller rossi chen kumar novak silva kim tanaka okafor jensen dubois moreau ivanov "
        "costa weber larsen nguyen haddad schmidt popescu kowalski yilmaz santos berg fischer wang lopez "
        "meyer olsen park".split())


@dataclass(frozen=True)
class Users:
    """Column-oriented user table (index = user number)."""

    name: np.ndarray        # str
    uid: np.ndarray         # int
    team: np.ndarray        # int, home team index into ``accounts``
    team2: np.ndarray       # int, second team or -1
    activity: np.ndarray    # float, relative submission weight
    habit: np.ndarray       # str, a key of HABITS
    cpu_inflation: np.ndarray
    mem_inflation: np.ndarray
    gpu_eff: np.ndarray     # steady-state GPU utilisation while training, 0..1
    wall_pad: np.ndarray    # median (limit / runtime) the user asks for
    asks_max_wall: np.ndarray  # bool: always asks the QoS maximum
    parker: np.ndarray      # bool: holds interactive GPUs idle for hours


@dataclass(frozen=True)
class Org:
    accounts: list[str]     # team account paths, index = team number
    profile: list[str]
    dataprep: np.ndarray
    demand: np.ndarray
    fairshare: np.ndarray   # static fair-share priority bonus per team
    users: Users


def build_org(rng: np.random.Generator) -> Org:
    accounts, profile, dataprep, demand, share = [], [], [], [], []
    for group, teams in TEAMS.items():
        gshare = GROUP_SHARES[group] / sum(GROUP_SHARES.values())
        tsum = sum(TEAM_SHARES[group].values())
        for team, spec in teams.items():
            accounts.append(f"{ORG}/{group}/{team}")
            profile.append(spec["profile"])
            dataprep.append(spec["dataprep"])
            demand.append(spec["demand"])
            share.append(gshare * TEAM_SHARES[group][team] / tsum)
    share_a = np.array(share)
    demand_a = np.array(demand)
    # Teams that used more than their share get a lower fair-share factor (Slurm's decayed-usage idea).
    fairshare = np.round(2000 * np.clip(1.5 - demand_a / 2, 0, 1)).astype(int)

    n_users = sum(TEAM_SIZES)
    pairs = rng.permutation(len(FIRST) * len(LAST))[:n_users]
    names = np.array([f"{FIRST[p // len(LAST)][0]}{LAST[p % len(LAST)]}" for p in pairs])
    # Rare initial+surname clashes get a digit, as real directories do.
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        k = seen.get(n, 0)
        seen[n] = k + 1
        if k:
            names[i] = f"{n}{k + 1}"
    team = np.repeat(np.arange(len(TEAM_SIZES)), TEAM_SIZES)
    team2 = np.full(n_users, -1)
    multi = rng.choice(n_users, size=8, replace=False)
    team2[multi] = (team[multi] + rng.integers(1, len(TEAM_SIZES), size=8)) % len(TEAM_SIZES)

    # Heavy-tailed activity: a few users submit most jobs; team activity follows its demand per share.
    team_weight = share_a * demand_a / np.bincount(team)
    activity = rng.lognormal(0.0, 1.0, n_users) * team_weight[team]
    activity /= activity.sum()

    keys = list(HABITS)
    habit = rng.choice(keys, size=n_users, p=[HABITS[k][0] for k in keys])
    infl_med = np.array([HABITS[h][1] for h in habit])
    cpu_infl = np.maximum(1.0, infl_med * rng.lognormal(0, 0.2, n_users))
    mem_infl = np.maximum(1.0, infl_med * rng.lognormal(0, 0.3, n_users))
    gpu_eff = np.clip(np.array([HABITS[h][2] for h in habit]) + rng.normal(0, 0.06, n_users), 0.08, 0.97)
    wall_pad = np.array([HABITS[h][3] for h in habit]) * rng.lognormal(0, 0.25, n_users)
    asks_max = rng.random(n_users) < np.where(habit == "hoarder", 0.5, 0.05)
    parker = np.zeros(n_users, bool)
    # Two interactive-heavy users who leave sessions open: the "parked GPU" story of DOMAIN.md section 6.
    cands = np.flatnonzero(np.isin(habit, ["over-requester", "hoarder"]))
    parker[rng.choice(cands, size=min(2, len(cands)), replace=False)] = True
    users = Users(names, 10001 + np.arange(n_users), team, team2, activity, habit,
                  cpu_infl, mem_infl, gpu_eff, wall_pad, asks_max, parker)
    return Org(accounts, profile, np.array(dataprep), demand_a, fairshare, users)


@dataclass(frozen=True)
class Layout:
    """Node table (index = node number). Partitions are disjoint node sets."""

    node: np.ndarray        # str host name
    partition: np.ndarray   # str
    gpu_type: np.ndarray    # str ('' for CPU-only)
    gpus: np.ndarray        # int
    cpus: np.ndarray        # int
    mem_bytes: np.ndarray   # int

    def __len__(self) -> int:
        return len(self.node)


NODE_TYPES = (  # type, share of GPU nodes, partition, gpus, cpus, memory GiB
    ("h100", 0.5, "gpu", 8, 112, 2048),
    ("a100", 0.375, "gpu", 8, 128, 1024),
    ("l40s", 0.125, "dev", 8, 96, 768),
)
CPU_NODE = ("cpu", "cpu", 0, 128, 1024)
GPU_MEM_BYTES = {"h100": 80 * GIB, "a100": 80 * GIB, "l40s": 48 * GIB}


def build_layout(gpu_nodes: int = 128) -> Layout:
    if gpu_nodes < 8:
        raise ValueError("--nodes must be at least 8 (one l40s node needs 1/8 of the GPU nodes)")
    counts = [int(round(gpu_nodes * share)) for _, share, *_ in NODE_TYPES]
    counts[0] = gpu_nodes - sum(counts[1:])  # rounding leftovers go to the largest pool
    rows = []
    for (gtype, _, part, gpus, cpus, mem), n in zip(NODE_TYPES, counts):
        rows += [(f"{gtype}-{i:03d}", part, gtype, gpus, cpus, mem * GIB) for i in range(1, n + 1)]
    prefix, part, gpus, cpus, mem = CPU_NODE
    n_cpu = max(2, gpu_nodes // 16)
    rows += [(f"{prefix}-{i:03d}", part, "", gpus, cpus, mem * GIB) for i in range(1, n_cpu + 1)]
    cols = list(zip(*rows))
    return Layout(*(np.array(c) for c in cols))
