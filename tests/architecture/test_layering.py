"""Import hygiene: dashboard -> queries, engine; engine imports neither Streamlit nor DuckDB (nor queries);
queries never imports Streamlit and takes from engine only its budget model; the dashboard never holds SQL
text nor runs a statement of its own."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(node.module.split(".")[0])
    return mods


FORBIDDEN = {
    "engine": {"streamlit", "duckdb", "queries", "dashboard"},
    "queries": {"streamlit", "dashboard"},
    # the dashboard's three non-UI products: usable without a browser, so without Streamlit
    "dashboard/cli": {"streamlit"},
    "dashboard/report": {"streamlit"},
    "dashboard/whatif": {"streamlit"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_forbidden_layers(package):
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = {str(f.relative_to(REPO)): sorted(_imports(f) & FORBIDDEN[package]) for f in files}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"layering broken: {offenders}"


def _sql_strings(source: str) -> list[str]:
    """String literals (f-string parts included) that read like a SQL statement: ``with NAME as (`` or
    ``select ... from`` with a clause or call prose does not have (where, join, group/order by, count(, $param)."""
    cte = re.compile(r"\s*with\s+(recursive\s+)?\w+(\s*\([^)]*\))?\s+as\s*\(", re.I)
    select = re.compile(r"\s*select\s+.+?\bfrom\b", re.I | re.S)
    clause = re.compile(r"\bwhere\b|\bjoin\b|\b(group|order)\s+by\b|\b\w+\(|\$\w+|\*|;", re.I)

    def is_sql(text: str) -> bool:
        return bool(cte.match(text) or (select.match(text) and clause.search(text)))

    return [node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and is_sql(node.value)]


def test_sql_detector_reads_literals_not_code():
    assert _sql_strings('q = "select a, b from jobs where x = 1"') == ["select a, b from jobs where x = 1"]
    assert _sql_strings('q = f"""\n  WITH t AS (select 1) select * from t"""')
    # a string ending a line followed by a `with` statement is code, not SQL (the old regex flagged it)
    assert not _sql_strings('x = "done"\nwith open("f") as fh:\n    pass\n')
    assert _sql_strings('q = "select user, sum(x) from t group by user"')
    assert not _sql_strings('label = "with the budget from the file"')  # prose
    assert not _sql_strings('label = "Select a team from the list"')


def test_dashboard_holds_no_sql():
    bad = [str(f.relative_to(REPO)) for f in (REPO / "dashboard").rglob("*.py") if _sql_strings(f.read_text())]
    assert not bad, f"SQL text in the dashboard (keep it in queries/analytics/sql/*.sql): {bad}"


_RUNS_SQL = re.compile(r"\bduckdb\.(connect|sql|query|execute)\(|\bcon\w*\.(sql|execute|query|register)\(")


def test_dashboard_runs_no_sql_itself():
    """Beyond SQL text: the dashboard opens no DuckDB connection and runs no statement of its own; every query
    goes through ``queries`` by name (``queries.run``, over ``queries.connect``'s connection)."""
    runs = {str(f.relative_to(REPO)): sorted({m.group(0) for m in _RUNS_SQL.finditer(f.read_text())})
            for f in (REPO / "dashboard").rglob("*.py")}
    bad = {k: v for k, v in runs.items() if v}
    assert not bad, f"the dashboard runs SQL itself (call a named query with queries.run): {bad}"


def test_sql_run_detector():
    assert _RUNS_SQL.search("con = duckdb.connect()") and _RUNS_SQL.search("self.con.execute(text)")
    assert _RUNS_SQL.search("df = duckdb.sql(q).pl()") and _RUNS_SQL.search("con.register('t', frame)")
    assert not _RUNS_SQL.search("queries.run('job_waste', con=con)") and not _RUNS_SQL.search("mod.register(sub)")


def test_layering_check_catches_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import duckdb\nfrom streamlit import x\n")
    assert _imports(bad) & FORBIDDEN["engine"] == {"duckdb", "streamlit"}


def _module_imports(path: Path, package: str) -> set[str]:
    """Full dotted names of every module ``path`` imports (relative imports resolved against ``package``)."""
    mods = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            if node.module:
                mods.add(".".join(base + [node.module]))
            else:  # ``from . import tree``: each name is a module of the package
                mods.update(".".join(base + [a.name]) for a in node.names)
    return mods


def _engine_imports(package_dir: Path) -> dict[str, list[str]]:
    out = {}
    for f in sorted(package_dir.rglob("*.py")):
        rel = f.relative_to(REPO).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        pkg = ".".join(parts if rel.name == "__init__" else parts[:-1])
        out[str(f.relative_to(REPO))] = sorted(m for m in _module_imports(f, pkg) if m.split(".")[0] == "engine")
    return out


def test_queries_import_only_the_budget_model_from_the_engine():
    """The budget model is the one room analytics and engine share: queries -> engine.budgets, nothing else."""
    bad = {f: [m for m in mods if m != "engine.budgets" and not m.startswith("engine.budgets.")]
           for f, mods in _engine_imports(REPO / "queries").items()}
    bad = {f: m for f, m in bad.items() if m}
    assert not bad, f"queries reaches into the engine past engine.budgets: {bad}"


def test_the_budget_model_is_a_leaf():
    """engine.budgets imports nothing from the rest of engine (only the stdlib and itself)."""
    files = _engine_imports(REPO / "engine" / "budgets")
    assert "engine/budgets/__init__.py" in files
    bad = {f: [m for m in mods if m != "engine.budgets" and not m.startswith("engine.budgets.")]
           for f, mods in files.items()}
    bad = {f: m for f, m in bad.items() if m}
    assert not bad, f"engine.budgets imports other engine modules: {bad}"
    third_party = {f: sorted(_imports(Path(REPO / f)) - {"engine", "__future__"} - set(sys.stdlib_module_names))
                   for f in files}
    assert not {f: m for f, m in third_party.items() if m}, f"engine.budgets imports past the stdlib: {third_party}"


def test_the_leaf_check_sees_a_back_arrow(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from .. import config\nfrom ..core import Simulator\nfrom . import tree\nimport engine.pool\n")
    assert _module_imports(bad, "engine.budgets") == {"engine.config", "engine.core", "engine.budgets.tree", "engine.pool"}
