"""The simulator's state has owners: outside ``engine/core.py`` no module assigns to the simulator's attributes.

``core.Simulator`` writes its own state (the job lifecycle, the logged-history pins of replay and warm start, a
whole-run kernel's outputs through ``adopt_whole_run``); the seams' objects own theirs (``caps.CapLedger``,
``preempt.PreemptState``, ``health.Health``, ``reasons.WaitReasons``, the pass's ``backfill.state.PassState``) and
change it through their methods. The one shared tally any kernel may bump is ``counters``.

The check reads the source (AST): an assignment, augmented assignment or ``del`` whose target is ``sim.X``,
``sim.X[...]`` or ``self.sim.X`` in any engine module but core.py fails, naming the file, line and attribute.
Inlined hot loops that alias a per-job list to a local (``backfill.fastpath``, the scalar profile loop) are the
documented exception the AST cannot see; their docstrings say what they write.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
SHARED_TALLIES = {"counters"}


def _sim_attribute(node) -> str | None:
    """The simulator attribute a target writes (``sim.X``, ``sim.X[i]``, ``self.sim.X``...), else None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if not isinstance(node, ast.Attribute):
        return None
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    chain.reverse()
    if isinstance(node, ast.Name) and node.id == "self" and chain[0] == "sim":
        chain = chain[1:]
    elif not (isinstance(node, ast.Name) and node.id == "sim"):
        return None
    # ``sim.X.Y = v`` sets an attribute of an object the simulator holds (the queue's documented ``hint`` slot):
    # that object's contract, not the simulator's state
    return chain[0] if len(chain) == 1 else None


def _writes(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            continue
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                name = _sim_attribute(t)
                if name is not None:
                    yield node.lineno, name, isinstance(t, ast.Subscript)


def _modules():
    return sorted(p for p in ENGINE.rglob("*.py") if p.name != "core.py" or p.parent != ENGINE)


def test_only_core_writes_simulator_attributes():
    offences = []
    for path in _modules():
        for line, name, subscript in _writes(ast.parse(path.read_text(), str(path))):
            if name in SHARED_TALLIES and subscript:
                continue
            offences.append(f"{path.relative_to(ENGINE.parent)}:{line}: sim.{name}")
    assert not offences, "engine modules writing the simulator's attributes:\n" + "\n".join(offences)


@pytest.mark.parametrize("source, expected", [
    ("sim.version += 1", [(1, "version", False)]),
    ("sim.reserved[j] = t", [(1, "reserved", True)]),
    ("self.sim.now = t", [(1, "now", False)]),
    ("sim.a, x = 1, 2", [(1, "a", False)]),
    ("del sim.pstate", [(1, "pstate", False)]),
    ("sim.counters['passes'] += 1", [(1, "counters", True)]),
    ("pre = sim.preempting\npre.burst[j] = True", []),
    ("sim.caps.hold(j, 1)", []),
    ("sim.queue.hint = h", []),
    ("self.sim.x = 1", [(1, "x", False)]),
])
def test_the_check_sees_each_kind_of_write(source, expected):
    assert list(_writes(ast.parse(source))) == expected
