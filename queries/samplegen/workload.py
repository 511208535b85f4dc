"""What users submit: job classes, sizes, requests, runtimes, outcomes and walltime limits.

Everything is drawn column-wise with numpy from the one generator passed in. A job's *outcome is drawn
before its runtime*: the state shares (COMPLETED / CANCELLED / failed) are then calibrated directly, and
the runtime follows from the outcome (a failure cuts the planned run short, a TIMEOUT runs exactly to its
limit, a cancelled job runs part of its plan or is cancelled while still pending).

Invariants:
- every time is an integer number of seconds (sacct's resolution); ``runtime_s <= limit_s``, and
  ``runtime_s == limit_s`` exactly for TIMEOUT;
- ``req_cpus``/``req_mem`` are per node and never exceed the smallest node of the job's partition;
- multi-node gangs use whole 8-GPU nodes of one GPU type;
- array tasks share user, name, request, submit time and throttle (``sub_id``, ``array_index`` >= 0);
  ``throttle`` > 0 caps how many tasks of the array run at once (``--array=0-11%3``).
"""
from __future__ import annotations

import numpy as np

from ..store.units import DAY, GIB, HOUR, MIN
from .org import GPU_CLASSES, MIN_RUNTIME_OVERRIDES, ORG, PROFILES, Layout, Org

# Limits people type: --time=10, 30, 1:00:00, ... 7-00:00:00.
NICE_LIMITS = np.array([2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 20 * MIN, 30 * MIN, 45 * MIN, HOUR, 90 * MIN,
                        2 * HOUR, 3 * HOUR, 4 * HOUR, 6 * HOUR, 8 * HOUR, 12 * HOUR, 16 * HOUR, DAY, 36 * HOUR,
                        2 * DAY, 3 * DAY, 4 * DAY, 5 * DAY, 7 * DAY])
NICE_CPUS = np.array([1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 112, 128])
NICE_MEM_GIB = np.array([4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2000])

QOS_MAX_WALL = {"debug": 4 * HOUR, "interactive": DAY, "normal": 7 * DAY, "high": 3 * DAY, "low": 7 * DAY}
QOS_PRIORITY = {"high": 20000, "debug": 16000, "interactive": 14000, "normal": 10000, "low": 2000}
# Declared minimum runtime per class (a lab's contract, DOMAIN.md section 6), written to Comment.
MIN_RUNTIME_S = {"training": 8 * HOUR, "eval": HOUR, "debug": 0, "interactive": 0, "dataprep": 0}

# class -> (GPU counts, probabilities); gangs above 8 GPUs take whole nodes.
GPU_SIZES = {
    "debug": ((1, 2, 4, 8), (0.76, 0.12, 0.08, 0.04)),
    "interactive": ((1, 2, 4, 8), (0.62, 0.20, 0.11, 0.07)),
    "eval": ((1, 2, 4, 8), (0.53, 0.14, 0.15, 0.18)),
    "training": ((1, 2, 4, 8, 16, 32, 64), (0.28, 0.12, 0.11, 0.28, 0.11, 0.06, 0.04)),
}
# class -> (median planned runtime s, lognormal sigma); training's median grows with its size below.
RUNTIME = {"debug": (3 * MIN, 1.3), "interactive": (90 * MIN, 0.9), "eval": (15 * MIN, 1.2),
           "training": (2 * HOUR, 1.7), "dataprep": (2 * MIN, 2.0)}
MAX_PLANNED_S = {"dataprep": DAY}  # data prep that would run longer is split into shards by its owner
# P(dev partition | class) for GPU classes; for training only small jobs that do not pin a GPU type.
DEV_SHARE = {"debug": 0.5, "interactive": 0.8, "eval": 0.5, "training": 0.25}

STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED")
OUTCOMES = {  # class -> probabilities in STATES order
    "debug": (0.655, 0.17, 0.15, 0.005, 0.02, 0.0, 0.0),
    "interactive": (0.25, 0.03, 0.55, 0.17, 0.0, 0.0, 0.0),
    "eval": (0.74, 0.10, 0.12, 0.02, 0.02, 0.0, 0.0),
    "training": (0.58, 0.07, 0.28, 0.03, 0.015, 0.01, 0.04),
    "dataprep": (0.86, 0.08, 0.03, 0.01, 0.02, 0.0, 0.0),
}
CANCEL_WHILE_PENDING = 0.3  # share of CANCELLED jobs whose user gives up waiting (if it is still pending)

# Names say what a job is (lab convention; ingest's job-class rules in queries/ingest/common.py read them).
NAMES = {
    "training": [f"{m}-{t}" for m in ("llama-8b", "vit-l16", "whisper-m", "clip-b32", "gpt-1b", "resnet50",
                                      "t5-xl", "dit-xl", "mistral-7b", "bert-large", "ppo-agent", "dlrm")
                 for t in ("pretrain", "sft", "finetune", "dpo", "train-ablation", "train-distill")],
    "eval": [f"eval-{m}-{b}" for m in ("llama-8b", "vit-l16", "whisper-m", "clip-b32", "mistral-7b", "dlrm")
             for b in ("mmlu", "gsm8k", "imagenet", "librispeech", "humaneval", "coco", "arena")],
    "debug": ["debug", "test", "bash", "dbg-dataloader", "nccl-test", "smoke-test", "repro", "profile"],
    "interactive": ["interactive", "jupyter", "bash", "vscode", "notebook", "spawner-jupyterhub"],
    "dataprep": ["tokenize", "shard", "dedup", "preprocess", "prep-features", "download", "convert",
                 "etl-webdataset", "data-proc-filter"],
}
FAIL_EXIT = np.array(["1:0", "1:0", "1:0", "1:0", "2:0", "0:6", "137:0", "255:0"])


def _nice_ceil(values: np.ndarray, nice: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(nice, values, side="left")
    return nice[np.minimum(idx, len(nice) - 1)]


def _nice_floor(values: np.ndarray, nice: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(nice, values, side="right") - 1
    return nice[np.maximum(idx, 0)]


def draw_gpu_submissions(rng: np.random.Generator, org: Org, layout: Layout, n: int) -> dict[str, np.ndarray]:
    """``n`` independent GPU submissions (before array expansion and before submit times are known)."""
    u = org.users
    user = rng.choice(len(u.name), size=n, p=u.activity)
    team = np.where((u.team2[user] >= 0) & (rng.random(n) < 0.3), u.team2[user], u.team[user])
    probs = np.array([PROFILES[org.profile[t]] for t in range(len(org.accounts))])
    cls_idx = (rng.random(n)[:, None] > np.cumsum(probs[team], axis=1)).sum(axis=1)
    cls = np.array(GPU_CLASSES)[np.minimum(cls_idx, len(GPU_CLASSES) - 1)]
    # Parkers open far more interactive sessions than anybody else.
    park = u.parker[user] & (rng.random(n) < 0.6)
    cls = np.where(park, "interactive", cls)

    gpus = np.zeros(n, int)
    for c, (sizes, p) in GPU_SIZES.items():
        m = cls == c
        gpus[m] = rng.choice(sizes, size=m.sum(), p=p)
    nodes = np.maximum(1, gpus // 8)
    gpn = gpus // nodes
    # Gangs and most 8-GPU training jobs pin a GPU type; the rest take any GPU of their partition.
    r = rng.random(n)
    big = (cls == "training") & (gpus >= 8)
    gpu_type = np.where(big & (r < 0.35), "h100", np.where(big & (r < 0.5), "a100", ""))
    gpu_type = np.where(gpus > 8, np.where(r < 0.55, "h100", "a100"), gpu_type)
    partition = np.where((rng.random(n) < np.vectorize(DEV_SHARE.get)(cls)) & (gpu_type == ""), "dev", "gpu")
    # A gang never asks for more than a quarter of its GPU pool (matters only for small --nodes).
    for t in ("h100", "a100"):
        pool = int((layout.gpu_type == t).sum())
        m = gpu_type == t
        nodes[m] = np.minimum(nodes[m], max(pool // 4, 1))
    gpus = nodes * gpn

    qos = np.select([cls == "debug", cls == "interactive"], ["debug", "interactive"], "normal")
    rq = rng.random(n)
    train = cls == "training"
    qos = np.where(train & (rq < 0.15), "high", np.where(train & (rq > 0.90), "low", qos))

    # The site's submit filter caps a GPU job at 3x its GPUs' fair share of the smallest node in the
    # partition; below that cap users inflate freely (and strand GPUs when they ask a lot).
    cap_cpu, cap_mem = np.zeros(n), np.zeros(n)
    for p in ("gpu", "dev"):
        m = partition == p
        on = layout.partition == p
        per_gpu_cpu = (layout.cpus[on] / layout.gpus[on]).min()
        per_gpu_mem = (layout.mem_bytes[on] / layout.gpus[on]).min()
        cap_cpu[m] = np.minimum(layout.cpus[on].min(), _nice_floor(3 * per_gpu_cpu * gpn[m], NICE_CPUS))
        cap_mem[m] = np.minimum(layout.mem_bytes[on].min(),
                                _nice_floor(3 * per_gpu_mem / GIB * gpn[m], NICE_MEM_GIB) * GIB)
    # Data loading needs a few cores per GPU; multi-node pre-training runs many loader workers per GPU.
    need_cpus = np.maximum(1.0, gpn * rng.lognormal(np.log(np.where(nodes > 1, 10.0, 4.0)), 0.4, n))
    need_mem = gpn * rng.lognormal(np.log(40.0), 0.5, n) * GIB
    subs = _requests(rng, org, user, need_cpus, need_mem, cap_cpu, cap_mem)

    runtime = _planned_runtime(rng, cls, gpus)
    n_tasks = np.ones(n, int)
    arr = ((cls == "eval") & (rng.random(n) < 0.12)) | (train & (gpus <= 2) & (rng.random(n) < 0.10))
    n_tasks[arr] = rng.integers(3, 13, size=arr.sum())
    # Hyper-parameter sweeps often go to the scavenger QoS, where they wait behind everything else, and
    # most are throttled (--array=0-11%3): tasks beyond the throttle wait even when nodes are free.
    qos = np.where(arr & train & (rng.random(n) < 0.5), "low", qos)
    throttle = np.where(arr & (rng.random(n) < 0.6), rng.integers(2, 5, n), 0)
    subs.update(throttle=throttle, user=user, team=team, cls=cls, partition=partition, gpus=gpus, nodes=nodes, gpn=gpn,
                gpu_type=gpu_type, qos=qos, planned_s=runtime, n_tasks=n_tasks,
                name=_names(rng, cls), need_cpus=need_cpus, need_mem=need_mem)
    return subs


def draw_cpu_submissions(rng: np.random.Generator, org: Org, layout: Layout, n: int) -> dict[str, np.ndarray]:
    """``n`` CPU-only data-prep submissions for the cpu partition."""
    u = org.users
    w = u.activity * org.dataprep[u.team]
    user = rng.choice(len(u.name), size=n, p=w / w.sum())
    team = u.team[user]
    cap_cpu = np.full(n, layout.cpus[layout.partition == "cpu"].min())
    cap_mem = np.full(n, layout.mem_bytes[layout.partition == "cpu"].min())
    need_cpus = np.maximum(1.0, rng.lognormal(np.log(4.0), 0.9, n))
    need_mem = need_cpus * rng.lognormal(np.log(3.0), 0.6, n) * GIB
    subs = _requests(rng, org, user, need_cpus, need_mem, cap_cpu, cap_mem)
    cls = np.full(n, "dataprep")
    n_tasks = np.ones(n, int)
    arr = rng.random(n) < 0.15
    n_tasks[arr] = rng.integers(4, 41, size=arr.sum())
    subs.update(throttle=np.where(arr & (rng.random(n) < 0.3), 8, 0), user=user, team=team, cls=cls,
                partition=np.full(n, "cpu"), gpus=np.zeros(n, int),
                nodes=np.ones(n, int), gpn=np.zeros(n, int), gpu_type=np.full(n, ""),
                qos=np.full(n, "normal"), planned_s=_planned_runtime(rng, cls, np.zeros(n, int)),
                n_tasks=n_tasks, name=_names(rng, cls), need_cpus=need_cpus, need_mem=need_mem)
    return subs


def _requests(rng, org, user, need_cpus, need_mem, cap_cpu, cap_mem):
    """Per-node CPU/memory requests: the real need inflated by the user's habit, rounded to what people type."""
    u = org.users
    n = len(user)
    req_cpus = _nice_ceil(need_cpus * u.cpu_inflation[user] * rng.lognormal(0, 0.15, n), NICE_CPUS)
    req_cpus = np.minimum(req_cpus, cap_cpu)
    req_mem_gib = _nice_ceil(need_mem / GIB * u.mem_inflation[user] * rng.lognormal(0, 0.2, n), NICE_MEM_GIB)
    req_mem = np.minimum(req_mem_gib * GIB, cap_mem).astype(np.int64)
    return {"req_cpus": req_cpus.astype(int), "req_mem": req_mem}


def _planned_runtime(rng, cls, gpus) -> np.ndarray:
    out = np.zeros(len(cls))
    for c, (median, sigma) in RUNTIME.items():
        m = cls == c
        med = median * (1 + np.log2(np.maximum(gpus[m], 1)) / 2) if c == "training" else median
        out[m] = np.minimum(rng.lognormal(np.log(med), sigma, m.sum()), MAX_PLANNED_S.get(c, np.inf))
    return np.maximum(out, 5.0)


def _names(rng, cls) -> np.ndarray:
    out = np.empty(len(cls), dtype=object)
    for c, names in NAMES.items():
        m = cls == c
        out[m] = np.array(names)[rng.integers(0, len(names), m.sum())]
    return out.astype(str)


def expand_arrays(subs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per job: array submissions become ``n_tasks`` rows sharing everything but their index."""
    reps = subs["n_tasks"]
    jobs = {k: np.repeat(v, reps) for k, v in subs.items()}
    sub_id = np.repeat(np.arange(len(reps)), reps)
    first = np.concatenate([[0], np.cumsum(reps)[:-1]])
    jobs["array_index"] = np.where(reps[sub_id] > 1, np.arange(len(sub_id)) - first[sub_id], -1)
    jobs["sub_id"] = sub_id
    return jobs


def draw_outcomes(rng: np.random.Generator, org: Org, jobs: dict[str, np.ndarray]) -> None:
    """Add state, runtime_s, limit_s, exit_code, patience_s, min_runtime_s (in place), per job."""
    n = len(jobs["cls"])
    u = org.users
    user, cls, qos = jobs["user"], jobs["cls"], jobs["qos"]
    probs = np.array([OUTCOMES[c] for c in cls])
    parked = u.parker[user] & (cls == "interactive")
    probs[parked] = (0.05, 0.0, 0.35, 0.60, 0.0, 0.0, 0.0)
    # Scavenger (low QoS) training is what gets preempted.
    low = qos == "low"
    probs[low] = (0.45, 0.07, 0.18, 0.03, 0.01, 0.01, 0.25)
    probs[~low, 6] = 0.0
    # Big runs are the ones people kill when the loss diverges: cancellation grows with size.
    big = (cls == "training") & ~low
    shift = 0.16 * np.log2(np.maximum(jobs["gpus"][big], 1)) / 6
    probs[big, 2] += shift - 0.06
    probs[big, 0] -= shift - 0.06
    probs /= probs.sum(axis=1, keepdims=True)
    state_idx = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    state = np.array(STATES)[np.minimum(state_idx, len(STATES) - 1)]

    qos_max = np.vectorize(QOS_MAX_WALL.get)(qos)
    # A parked session would stay open forever: it asks a long limit and lives until (nearly) the end of it.
    qos_max = np.where(parked, rng.choice([8 * HOUR, 12 * HOUR, DAY], size=n), qos_max)
    planned = np.minimum(jobs["planned_s"], 0.97 * qos_max)
    planned = np.where(parked, qos_max, planned)
    pad = np.maximum(1.05, u.wall_pad[user] * rng.lognormal(0, 0.3, n))
    limit = np.minimum(_nice_ceil(planned * pad, NICE_LIMITS), qos_max)
    limit = np.where(u.asks_max_wall[user] & (rng.random(n) < 0.8), qos_max, limit)
    limit = np.maximum(limit, _nice_ceil(planned, NICE_LIMITS)).astype(np.int64)
    limit = np.minimum(limit, qos_max)

    frac = np.ones(n)
    frac = np.where(state == "FAILED", rng.beta(0.7, 2.0, n), frac)
    # A cancelled run was usually watched for a while first (loss curves, a stuck eval) before the kill.
    frac = np.where(state == "CANCELLED", rng.uniform(np.where(cls == "training", 0.5, 0.2), 1.0, n), frac)
    frac = np.where(state == "OUT_OF_MEMORY", rng.beta(1.0, 3.0, n), frac)
    frac = np.where(np.isin(state, ["NODE_FAIL", "PREEMPTED"]), rng.uniform(0.05, 0.95, n), frac)
    frac = np.where(parked & (state != "TIMEOUT"), rng.uniform(0.4, 1.0, n), frac)
    runtime = np.maximum(np.floor(planned * frac), 3).astype(np.int64)
    # A TIMEOUT needed more than it asked for: pick the limit below the plan, then it runs exactly to it.
    to = state == "TIMEOUT"
    to_limit = np.minimum(_nice_floor(planned / rng.uniform(1.1, 2.5, n), NICE_LIMITS), qos_max)
    limit = np.where(to & ~parked, to_limit, limit).astype(np.int64)
    runtime = np.where(to, limit, np.minimum(runtime, limit - 1))

    exit_code = np.select(
        [state == "FAILED", state == "CANCELLED", state == "OUT_OF_MEMORY"],
        [FAIL_EXIT[rng.integers(0, len(FAIL_EXIT), n)], "0:15", "0:125"], "0:0")
    patience = np.where((state == "CANCELLED") & (rng.random(n) < CANCEL_WHILE_PENDING),
                        np.floor(rng.lognormal(np.log(3 * HOUR), 1.0, n)), np.inf)
    min_rt = np.vectorize(MIN_RUNTIME_S.get)(cls).astype(np.int64)
    for team, over in MIN_RUNTIME_OVERRIDES.items():
        t = org.accounts.index(f"{ORG}/{team}")
        for c, v in over.items():
            min_rt[(jobs["team"] == t) & (cls == c)] = v
    jobs.update(state=state, runtime_s=runtime, limit_s=limit, exit_code=exit_code, patience_s=patience,
                min_runtime_s=min_rt,
                priority_base=np.vectorize(QOS_PRIORITY.get)(qos).astype(np.int64)
                + org.fairshare[jobs["team"]])


def submit_times(rng: np.random.Generator, n: int, t0: int, t1: int) -> np.ndarray:
    """Submit times in [t0, t1): busier on weekday working hours (UTC+1 lab), quiet at night."""
    hours = np.arange(t0 // HOUR, -(-t1 // HOUR))
    local = hours + 1
    hod = local % 24
    dow = (local // 24 + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    weight = np.where((hod >= 9) & (hod < 19), 1.6, np.where((hod >= 7) & (hod < 23), 0.9, 0.35))
    weight = weight * np.where(dow >= 5, 0.45, 1.0)
    h = rng.choice(hours, size=n, p=weight / weight.sum())
    t = h * HOUR + rng.integers(0, HOUR, n)
    return np.clip(t, t0, t1 - 1)  # unsorted: submissions are i.i.d., each takes one random time
