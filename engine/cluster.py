"""The simulated machine: a node list, or one processor pool (processor-count mode).

Constructors: ``Cluster.uniform(nodes, gpus, cpus)``, ``Cluster.procs(P)``, ``Cluster.from_frame(nodes_df)``
(the canonical ``nodes`` table: node, partition, cpus, gpus, gpu_type, mem_bytes) and
``Cluster.from_csv(path)``, which reads either that table as CSV or the Alibaba openb node list
(``sn,cpu_milli,memory_mib,gpu,model``).

Invariants:
- At least one node; names are unique; cpus, gpus >= 0 and finite; ``mem_bytes`` is ``None`` (unknown:
  memory is not a constraint on that node) or >= 0.
- ``procs_mode`` clusters have exactly one node whose ``cpus`` (or ``gpus`` when ``resource == "gpus"``) is
  the processor count; jobs are sized by that one resource and never placed on named nodes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .config import ConfigError

OPENB_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


@dataclass(frozen=True)
class Cluster:
    names: tuple
    gpus: tuple
    cpus: tuple
    mem_bytes: tuple
    partition: tuple
    gpu_type: tuple
    procs_mode: bool = False
    resource: str = "cpus"  # processor-count mode: which request column sizes a job
    name: str = "sim"

    def __post_init__(self):
        n = len(self.names)
        if n == 0:
            raise ConfigError("cluster: no nodes")
        for attr in ("gpus", "cpus", "mem_bytes", "partition", "gpu_type"):
            if len(getattr(self, attr)) != n:
                raise ConfigError(f"cluster: {attr} has {len(getattr(self, attr))} values for {n} nodes")
        if len(set(self.names)) != n:
            dup = sorted({x for x in self.names if self.names.count(x) > 1})[:3]
            raise ConfigError(f"cluster: duplicate node names {dup}")
        for attr in ("gpus", "cpus"):
            for node, v in zip(self.names, getattr(self, attr)):
                if v is None or not math.isfinite(v) or v < 0:
                    raise ConfigError(f"cluster: node {node}: {attr} must be a number >= 0, got {v!r}")
        for node, v in zip(self.names, self.mem_bytes):
            if v is not None and (not math.isfinite(v) or v < 0):
                raise ConfigError(f"cluster: node {node}: mem_bytes must be >= 0, got {v!r}")
        if self.procs_mode and (n != 1 or self.resource not in ("cpus", "gpus")):
            raise ConfigError("cluster: processor-count mode needs exactly one pool and resource cpus|gpus")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def uniform(cls, nodes: int, gpus_per_node: float = 0, cpus_per_node: float = 1,
                mem_bytes_per_node: float | None = None, prefix: str = "node", gpu_type: str | None = None) -> "Cluster":
        if not isinstance(nodes, int) or nodes < 1:
            raise ConfigError(f"cluster: --nodes must be an integer >= 1, got {nodes!r}")
        width = max(3, len(str(nodes)))
        names = tuple(f"{prefix}{i:0{width}d}" for i in range(1, nodes + 1))
        return cls(names, (float(gpus_per_node),) * nodes, (float(cpus_per_node),) * nodes,
                   (None if mem_bytes_per_node is None else float(mem_bytes_per_node),) * nodes,
                   (None,) * nodes, (gpu_type,) * nodes)

    @classmethod
    def procs(cls, count: int, resource: str = "cpus") -> "Cluster":
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"cluster: --procs must be an integer >= 1, got {count!r}")
        gpus, cpus = (float(count), 0.0) if resource == "gpus" else (0.0, float(count))
        return cls(("procs",), (gpus,), (cpus,), (None,), (None,), (None,), procs_mode=True, resource=resource)

    @classmethod
    def from_frame(cls, nodes: pl.DataFrame, name: str = "sim") -> "Cluster":
        """From a frame with the canonical nodes columns (``node`` required; missing numbers count as 0)."""
        if "node" not in nodes.columns:
            raise ConfigError("cluster: nodes table has no 'node' column")
        if nodes.height == 0:
            raise ConfigError("cluster: nodes table is empty")
        df = nodes.sort("node") if "cluster" not in nodes.columns else nodes.sort(["cluster", "node"])

        def col(c, dtype, default=None):
            if c not in df.columns:
                return [default] * df.height
            return df[c].cast(dtype, strict=False).to_list()

        gpus = [0.0 if v is None else v for v in col("gpus", pl.Float64)]
        cpus = [0.0 if v is None else v for v in col("cpus", pl.Float64)]
        return cls(tuple(df["node"].cast(pl.String).to_list()), tuple(gpus), tuple(cpus),
                   tuple(col("mem_bytes", pl.Float64)), tuple(col("partition", pl.String)),
                   tuple(None if v == "" else v for v in col("gpu_type", pl.String)), name=name)

    @classmethod
    def from_csv(cls, path: str | Path) -> "Cluster":
        """A nodes CSV in the canonical shape, or the Alibaba openb node list."""
        path = Path(path)
        try:
            df = pl.read_csv(path, infer_schema_length=0)  # all strings: we cast with our own checks
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise ConfigError(f"cluster: cannot read {path}: {exc}") from exc
        cols = set(df.columns)
        if set(OPENB_COLUMNS) <= cols:
            df = _numeric(df, path, ("cpu_milli", "memory_mib", "gpu"))
            df = df.select(
                pl.col("sn").alias("node"),
                (pl.col("cpu_milli") / 1000.0).alias("cpus"),
                (pl.col("memory_mib") * float(1 << 20)).alias("mem_bytes"),
                pl.col("gpu").alias("gpus"),
                pl.when(pl.col("gpu") > 0).then(pl.col("model")).alias("gpu_type"),
            )
        elif "node" in cols:
            df = _numeric(df, path, tuple(c for c in ("cpus", "gpus", "mem_bytes") if c in cols))
        else:
            raise ConfigError(f"cluster: {path}: expected a nodes CSV (node,partition,cpus,gpus,gpu_type,mem_bytes) "
                              f"or an openb node list ({','.join(OPENB_COLUMNS)}); header is {df.columns}")
        return cls.from_frame(df, name=path.stem)

    # ------------------------------------------------------------------ summaries
    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> float:
        return float(sum(self.gpus))

    @property
    def total_cpus(self) -> float:
        return float(sum(self.cpus))

    @property
    def charge_resource(self) -> str:
        """What fair share charges and utilisation measures: GPUs when the machine has any, else CPUs."""
        if self.procs_mode:
            return self.resource
        return "gpus" if self.total_gpus > 0 else "cpus"

    def describe(self) -> dict:
        return {"nodes": self.size, "gpus": self.total_gpus, "cpus": self.total_cpus,
                "procs_mode": self.procs_mode, "resource": self.charge_resource}


def _numeric(df: pl.DataFrame, path: Path, cols: tuple) -> pl.DataFrame:
    out = df.with_columns([pl.col(c).str.strip_chars().cast(pl.Float64, strict=False).alias(c) for c in cols])
    for c in cols:
        bad = out.with_row_index("line", offset=2).filter(pl.col(c).is_null() & df[c].is_not_null()
                                                          & (df[c].str.strip_chars() != ""))
        if bad.height:
            line = bad["line"][0]
            raise ConfigError(f"cluster: {path}:{line}: {c}: not a number: {df[c][line - 2]!r}")
    return out
