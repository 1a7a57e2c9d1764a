"""The package keeps its shape: a small core root and no module that mixes many jobs.

The core root (``thalweg_bytewax/*.py``) holds only cross-cutting modules; every
capability is a folder (docs/architecture.md). A module over 400 lines has, in this
codebase's history, always been two jobs sharing a file: split it along its seam.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "thalweg_bytewax"
CORE_ROOT_MAX = 10
MODULE_LINES_MAX = 400


def test_the_core_root_holds_at_most_ten_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))  # __init__.py included
    assert len(root) <= CORE_ROOT_MAX, (
        f"{len(root)} modules at the package root ({', '.join(root)}): move a capability's "
        "module into its folder (docs/architecture.md maps them)"
    )


def test_no_library_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES_MAX
    }
    assert not long, (
        f"modules over {MODULE_LINES_MAX} lines: {long}; split each along the seam between its jobs"
    )


def test_no_library_module_keeps_state_in_a_threading_local() -> None:
    # A Bytewax cluster's worker gets an empty threading.local at every batch (see
    # thalweg_bytewax/system/thread_slots.py): per-thread state there is ThreadSlots.
    import ast

    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = (
                isinstance(node, ast.Attribute)
                and node.attr == "local"
                and isinstance(node.value, ast.Name)
                and node.value.id == "threading"
            ) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "threading"
                and any(a.name == "local" for a in node.names)
            )
            if named:
                found.append(f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}")
    assert not found, (
        f"threading.local at {found}: on a cluster's worker it is emptied every batch; "
        "keep per-thread state in thalweg_bytewax.system.thread_slots.ThreadSlots"
    )
