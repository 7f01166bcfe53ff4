"""What a module of this package imports, read from its source (no module is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported(module: str, *, top_level: bool = False) -> set[str]:
    """The modules ``module`` (of this package) imports: in its functions too, or only at its
    top (``top_level``: what importing it runs at once). ``from . import x`` names ``x`` where it
    is a module of its own."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in tree.body if top_level else ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            out.add(base)
            out.update(
                f"{base}.{alias.name}"
                for alias in node.names
                if ROOT.joinpath(*base.split("."), f"{alias.name}.py").exists()
            )
    return out
