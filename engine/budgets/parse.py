"""Reads ``budgets.toml`` text into a ``BudgetTree`` (the format is documented in ``engine.budgets.tree``).

Every error is a ``BudgetError`` naming the offending key path (``tree.research.vision.share``,
``period[1].start``, ``node[2].parent``) and, when it can be found in the text, its line. Parsing stops at the
first error. The base tree and each period are first flattened to ``{path: attributes}`` specs; a period's spec
is the previous one with its overrides applied, and each spec is built into an immutable tree.
"""
from __future__ import annotations

import difflib
import math
import re
import tomllib
from pathlib import Path

from .tree import (
    _DURATION, _NAME, _UNITS, FLAT_KEYS, JOB_CLASSES, NODE_KEYS, PERIOD_KEYS, TOP_KEYS, UNBUDGETED, UNITS,
    BudgetError, BudgetNode, BudgetTree, BudgetVersion, _utc,
)

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
_BARE_OR_QUOTED = r"""(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')"""
_KEYVAL = re.compile(rf"^\s*({_BARE_OR_QUOTED}(?:\s*\.\s*{_BARE_OR_QUOTED})*)\s*=")


def _fmt(key: tuple) -> str:
    out = ""
    for k in key:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _split_key(text: str) -> tuple[str, ...]:
    return tuple(m.strip("\"'") for m in re.findall(r'"[^"]*"|\'[^\']*\'|[^.\s]+', text))


def locate(text: str, key: tuple) -> int | None:
    """Best-effort 1-based line of a key path like ``("period", 1, "tree", "a", "share")``.

    Tracks the current table through ``[a.b]`` / ``[[a]]`` headers (counting array entries) and returns the
    line of the exact key, else of the deepest table header on its path.
    """
    want, counts, current, best, best_len = tuple(key), {}, (), None, 0

    def indexed(parts):
        path = ()
        for part in parts:
            path += (part,)
            if path in counts:
                path += (counts[path],)
        return path

    for no, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            parts = _split_key(header.group(2))
            if header.group(1) == "[[":
                array = indexed(parts[:-1]) + (parts[-1],)
                counts[array] = counts.get(array, -1) + 1
                current = array + (counts[array],)
            else:
                current = indexed(parts)
            full = current
        else:
            kv = _KEYVAL.match(line)
            if not kv:
                continue
            full = current + _split_key(kv.group(1))
        if len(full) > best_len and want[: len(full)] == full:
            best, best_len = no, len(full)
    return best


class Parser:
    def __init__(self, text: str, source: str):
        self.text, self.source = text, source

    def error(self, message: str, key: tuple = ()) -> BudgetError:
        line = locate(self.text, key) if key else None
        return BudgetError(message, key=_fmt(key) or None, line=line, source=self.source)

    # -------------------------------------------------------------------------------- document
    def tree(self) -> BudgetTree:
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            raise BudgetError(f"not valid TOML: {exc}", source=self.source) from None
        self.keys(doc, TOP_KEYS, ())
        cluster = doc.get("cluster")
        if cluster is not None and not isinstance(cluster, str):
            raise self.error(f"must be a string, got {cluster!r}", ("cluster",))
        defaults = self.min_runtime(doc.get("min_runtime", {}), ("min_runtime",))
        cluster_gpus = self.number(doc, "cluster_gpus", ())
        qos_preempts = self.qos(doc.get("qos", {}), ("qos",))
        unit = doc.get("unit")
        if unit is not None and unit not in UNITS:
            raise self.error(f"must be \"gpu\" (GPU-hours) or \"cpu\" (core-hours), got {unit!r}", ("unit",))
        spec: dict[str, dict] = {}
        where: dict[str, tuple] = {}  # path -> key of the table that last set it (for error messages)
        self.nested(doc.get("tree", {}), "", ("tree",), spec, where, override=False)
        self.flat(doc.get("node", []), ("node",), spec, where, override=False)
        if not spec:
            raise self.error("no budget nodes: add [tree.NAME] tables or [[node]] entries")
        versions = [BudgetVersion(None, self.build(spec, where))]
        periods = doc.get("period", [])
        if not isinstance(periods, list) or not all(isinstance(p, dict) for p in periods):
            raise self.error("must be [[period]] tables", ("period",))
        for i, period in enumerate(periods):
            key = ("period", i)
            self.keys(period, PERIOD_KEYS, key)
            if "start" not in period:
                raise self.error("a period needs start = YYYY-MM-DD (UTC)", key)
            start = self.date(period["start"], key + ("start",))
            prev = versions[-1].start
            if prev is not None and start <= prev:
                what = "repeats" if start == prev else "is before"
                raise self.error(f"{start:%Y-%m-%d %H:%M} {what} period[{i - 1}].start {prev:%Y-%m-%d %H:%M}: "
                                 "periods must have strictly increasing starts (no overlaps)", key + ("start",))
            spec = {p: dict(a) for p, a in spec.items()}
            where = dict(where)
            self.nested(period.get("tree", {}), "", key + ("tree",), spec, where, override=True)
            self.flat(period.get("node", []), key + ("node",), spec, where, override=True)
            versions.append(BudgetVersion(start, self.build(spec, where, f" (in force from {start:%Y-%m-%d})")))
        return BudgetTree(tuple(versions), defaults, cluster_gpus, cluster, self.source, qos_preempts, unit)

    def qos(self, table, key: tuple) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """``[qos]``: QoS name = { preempts = [QoS names] } (Slurm's preempt/qos pairs)."""
        if not isinstance(table, dict):
            raise self.error("must be a table of QoS = { preempts = [...] }", key)
        out = []
        for name, spec in table.items():
            if not isinstance(spec, dict):
                raise self.error("must be a table, e.g. high = { preempts = [\"low\"] }", key + (name,))
            self.keys(spec, {"preempts"}, key + (name,))
            victims = spec.get("preempts", [])
            if not isinstance(victims, list) or not all(isinstance(v, str) and v for v in victims):
                raise self.error("preempts must be a list of QoS names", key + (name, "preempts"))
            if name in victims:
                raise self.error(f"QoS {name!r} cannot preempt itself", key + (name, "preempts"))
            out.append((name, tuple(sorted(set(victims)))))
        return tuple(sorted(out))

    def keys(self, table: dict, allowed: set[str], key: tuple) -> None:
        for k in table:
            if k not in allowed:
                raise self.unknown(k, allowed, key)

    def unknown(self, k: str, allowed, key: tuple) -> BudgetError:
        close = difflib.get_close_matches(k, sorted(allowed), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(sorted(allowed))}"
        return self.error(f"unknown key {k!r}{hint}", key + (k,))

    # -------------------------------------------------------------------------------- nodes
    def nested(self, table, parent: str, key: tuple, spec, where, override: bool) -> None:
        if not isinstance(table, dict):
            raise self.error("must be a table of nodes, e.g. [tree.NAME]", key)
        for name, value in table.items():
            if not isinstance(value, dict):
                raise self.error(f"expected a node table [{_fmt(key + (name,))}], got {value!r}", key + (name,))
            self.node(value, parent, name, key + (name,), spec, where, override)

    def node(self, table: dict, parent: str, name: str, key: tuple, spec, where, override: bool) -> None:
        self.name(name, key)
        path = self.place(f"{parent}/{name}" if parent else name, spec, key, override)
        attrs, children = {}, []
        for k, v in table.items():
            if k in NODE_KEYS:
                attrs[k] = v
            elif isinstance(v, dict):
                children.append((k, v))
            else:
                raise self.unknown(k, NODE_KEYS, key)
        spec.setdefault(path, {}).update(self.attrs(attrs, key))
        where[path] = key
        for k, v in children:
            self.node(v, path, k, key + (k,), spec, where, override)

    def place(self, path: str, spec, key: tuple, override: bool) -> str:
        """The spelling of ``path`` in ``spec`` (matching is case-insensitive); a clash is an error in the base."""
        existing = {p.casefold(): p for p in spec}.get(path.casefold())
        if existing is not None and not override:
            raise self.error(f"duplicate node {path!r} (already defined as {existing!r})", key)
        return existing or path

    def flat(self, entries, key: tuple, spec, where, override: bool) -> None:
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise self.error("must be an array of tables [[node]]", key)
        by_name: dict[str, tuple[dict, tuple]] = {}
        resolved: list[tuple[str, dict, tuple]] = []
        for i, entry in enumerate(entries):
            k = key + (i,)
            self.keys(entry, FLAT_KEYS, k)
            if "path" in entry:
                if "name" in entry or "parent" in entry:
                    raise self.error("give either path = or name = (+ parent =), not both", k + ("path",))
                path = entry["path"]
                if not isinstance(path, str) or not path.strip("/"):
                    raise self.error(f"must be a node path like 'org/group', got {path!r}", k + ("path",))
                for part in path.strip("/").split("/"):
                    self.name(part, k + ("path",))
                resolved.append((path.strip("/"), entry, k))
                continue
            if "name" not in entry:
                raise self.error("a [[node]] needs name = (and parent =) or path =", k)
            self.name(entry["name"], k + ("name",))
            cf = entry["name"].casefold()
            if cf in by_name:
                raise self.error(f"duplicate node name {entry['name']!r} (also {_fmt(by_name[cf][1])})", k + ("name",))
            by_name[cf] = (entry, k)
        paths: dict[str, str] = {}

        def path_of(cf: str, chain: list[str]) -> str:
            entry, k = by_name[cf]
            if cf in chain:
                cycle = [by_name[c][0]["name"] for c in chain[chain.index(cf):]] + [entry["name"]]
                raise self.error("parent cycle: " + " -> ".join(cycle), k + ("parent",))
            if cf in paths:
                return paths[cf]
            parent = entry.get("parent")
            existing = {p.casefold(): p for p in spec}
            if parent is not None and not isinstance(parent, str):
                raise self.error(f"must be a node name or path, got {parent!r}", k + ("parent",))
            if not parent:
                same = [p for p in spec if p.rpartition("/")[2].casefold() == cf] if override else []
                path = same[0] if len(same) == 1 else entry["name"]
            elif parent.casefold() in by_name:
                path = path_of(parent.casefold(), chain + [cf]) + "/" + entry["name"]
            elif parent.strip("/").casefold() in existing:
                path = existing[parent.strip("/").casefold()] + "/" + entry["name"]
            else:
                raise self.error(f"parent {parent!r} is neither a [[node]] name nor an existing node path",
                                 k + ("parent",))
            paths[cf] = path
            return path

        resolved += [(path_of(cf, []), entry, k) for cf, (entry, k) in by_name.items()]
        for path, entry, k in sorted(resolved, key=lambda r: r[0].count("/")):
            path = self.place(path, spec, k, override)
            attrs = {a: v for a, v in entry.items() if a in NODE_KEYS}
            spec.setdefault(path, {}).update(self.attrs(attrs, k))
            where[path] = k

    def name(self, name, key: tuple) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise self.error(f"invalid node name {name!r}: non-empty, without '/', spaces or parentheses", key)
        if name.casefold() == UNBUDGETED:
            raise self.error(f"{UNBUDGETED!r} is reserved for accounts the tree does not name", key)

    def attrs(self, raw: dict, key: tuple) -> dict:
        out = {k: self.number(raw, k, key) for k in ("share", "guaranteed_gpus", "max_gpus") if k in raw}
        if "min_runtime" in raw:
            out["min_runtime_s"] = self.min_runtime(raw["min_runtime"], key + ("min_runtime",))
        if "description" in raw:
            if not isinstance(raw["description"], str):
                raise self.error(f"must be a string, got {raw['description']!r}", key + ("description",))
            out["description"] = raw["description"]
        return out

    def build(self, spec: dict[str, dict], where: dict[str, tuple], label: str = "") -> BudgetNode:
        kids: dict[str, list[str]] = {}
        for path in spec:
            parent = path.rpartition("/")[0]
            if parent and parent not in spec:
                raise self.error(f"parent {parent!r} of {path!r} does not exist{label}", where[path])
            kids.setdefault(parent, []).append(path)

        def make(path: str) -> BudgetNode:
            a = spec[path]
            node = BudgetNode(path.rpartition("/")[2], path, a.get("share", 1.0), a.get("guaranteed_gpus"),
                              a.get("max_gpus"), a.get("min_runtime_s", ()), a.get("description", ""),
                              tuple(make(c) for c in kids.get(path, [])))
            g, m = node.guaranteed_gpus, node.max_gpus
            if g is not None and m is not None and g > m:
                raise self.error(f"guaranteed_gpus {g:g} is above max_gpus {m:g}{label}", where[path])
            total = sum(c.guaranteed_gpus or 0.0 for c in node.children)
            if g is not None and total > g:
                raise self.error(f"children's guaranteed_gpus sum to {total:g}, above this node's guaranteed_gpus "
                                 f"{g:g}{label}", where[path])
            return node

        return BudgetNode("", "", children=tuple(make(p) for p in kids.get("", [])))

    # -------------------------------------------------------------------------------- values
    def number(self, table: dict, name: str, key: tuple) -> float | None:
        v = table.get(name)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise self.error(f"must be a finite number >= 0, got {v!r}", key + (name,))
        return float(v)

    def min_runtime(self, table, key: tuple) -> tuple[tuple[str, float], ...]:
        if not isinstance(table, dict):
            raise self.error("must be a table of job class = duration", key)
        self.keys(table, set(JOB_CLASSES) | {"default"}, key)
        return tuple(sorted((cls, self.duration(v, key + (cls,))) for cls, v in table.items()))

    def duration(self, v, key: tuple) -> float:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            return float(v)
        if isinstance(v, str):
            s = v.strip().lower().replace(" ", "")
            if s == "0":
                return 0.0
            if s and not _DURATION.sub("", s):
                return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(s))
        raise self.error(f"not a duration (seconds >= 0, or like '8h', '30m', '1h30m', '2d'): {v!r}", key)

    def date(self, v, key: tuple):
        try:
            return _utc(v)
        except (TypeError, ValueError):
            raise self.error(f"must be a date like 2026-11-15 or a datetime (UTC), got {v!r}", key) from None


def load(path: str | Path) -> BudgetTree:
    """Read and parse a budgets.toml file; an unreadable file is a ``BudgetError`` naming it."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise BudgetError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    return parse(text, source=str(path))


def parse(text: str, source: str = "budgets.toml") -> BudgetTree:
    """Parse a budgets.toml text into a ``BudgetTree``; raises ``BudgetError`` on the first problem."""
    return Parser(text, source).tree()
