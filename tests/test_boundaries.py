"""The layers meet through named interfaces: no module imports another's private names.

ruff's SLF001 (ruff.toml) catches ``obj._member`` outside the core; it does not
see ``from .x import _name`` or ``module._name``, which this test does, for the
whole package (the core included).
"""

from __future__ import annotations

import ast
from pathlib import Path

import jsclient

PACKAGE = Path(jsclient.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    own_modules: set[str] = set()  # names bound to modules of this package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("jsclient")):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{path.name}:{node.lineno}: from {'.' * node.level}{node.module or ''} "
                                 f"import {alias.name}")
                else:
                    own_modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in own_modules
            and node.value.id[:1].islower()  # a module, not a class of this package
            and _private(node.attr)
        ):
            found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    offences = [o for path in sorted(PACKAGE.rglob("*.py")) for o in _offences(path)]
    assert offences == []
