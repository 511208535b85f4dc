"""Import hygiene: dashboard -> queries, engine; engine imports neither Streamlit nor DuckDB (nor queries);
queries never imports Streamlit; the dashboard never holds SQL text."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_forbidden_layers(package):
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = {str(f.relative_to(REPO)): sorted(_imports(f) & FORBIDDEN[package]) for f in files}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"layering broken: {offenders}"


def test_dashboard_holds_no_sql():
    sql = re.compile(r"""["'](\s*)(select|with)\s+[\w*(]""", re.I)
    bad = [str(f.relative_to(REPO)) for f in (REPO / "dashboard").rglob("*.py") if sql.search(f.read_text())]
    assert not bad, f"SQL text in the dashboard (keep it in queries/sql/*.sql): {bad}"


def test_layering_check_catches_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import duckdb\nfrom streamlit import x\n")
    assert _imports(bad) & FORBIDDEN["engine"] == {"duckdb", "streamlit"}
