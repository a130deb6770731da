"""Every public call's docstring gives each parameter, the return value and the errors raised.

The docstrings are Google style (``Args:``, ``Returns:`` or ``Yields:``,
``Raises:``, and ``Attributes:`` for the fields of a value type), which the
API reference renders through Sphinx's napoleon.  One test per exported
name, so ``pytest -k JetStream`` checks one class.  What is exempt, and
why:

* an exception class's constructor raises nothing of its own;
* ``connect()`` and ``Connection`` take the fields of :class:`Options` as
  keywords: those are documented once, as Options' attributes;
* an old name kept as a deprecated alias is documented by the new one.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

import jsclient
import jsclient.instrumentation
import jsclient.micro
import jsclient.spark

SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes):\s*$", re.MULTILINE)
#: Option fields, documented as Options' attributes rather than on every call that takes them.
OPTION_FIELDS = {f.name for f in dataclasses.fields(jsclient.Options)}


def sections(doc: str) -> dict[str, str]:
    """The Google-style sections of ``doc``, by title (Arguments and Parameters count as Args)."""
    found: dict[str, str] = {}
    marks = list(SECTION.finditer(doc))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(doc)
        title = {"Arguments": "Args", "Parameters": "Args"}.get(mark.group(1), mark.group(1))
        found[title] = found.get(title, "") + doc[mark.end():end]
    return found


def entries(section: str) -> set[str]:
    """The names a section describes: its lines ``name:`` or ``name (type):``, with ``*`` kept."""
    return set(re.findall(r"^\s{2,}(\*{0,2}\w+)(?:\s*\([^)]*\))?\s*:", section, re.MULTILINE))


def exported() -> Iterator[tuple[str, Any]]:
    for module in (jsclient, jsclient.micro, jsclient.spark, jsclient.instrumentation):
        for name in module.__all__:
            if not name.startswith("_"):
                yield f"{module.__name__}.{name}", getattr(module, name)


def members(obj: Any) -> Iterator[tuple[str, Callable[..., Any]]]:
    """A function itself, or a class's constructor and public methods (not inherited from builtins)."""
    if inspect.isfunction(obj):
        yield "", obj
        return
    if not isinstance(obj, type):
        return
    for name, member in inspect.getmembers(obj, inspect.isfunction):
        if getattr(member, "__deprecated_alias_of__", None):
            continue
        if name.startswith("_") and name != "__init__":
            continue
        if getattr(member, "__module__", "").split(".")[0] != "jsclient":
            continue  # a builtin's or a library's (msgspec, enum) method
        yield name, member


def value_type(obj: Any) -> bool:
    return isinstance(obj, type) and (issubclass(obj, msgspec.Struct) or dataclasses.is_dataclass(obj))


def fields_of(obj: type) -> list[str]:
    if issubclass(obj, msgspec.Struct):
        return list(obj.__struct_fields__)
    return [f.name for f in dataclasses.fields(obj)]


def problems(where: str, obj: Any) -> list[str]:
    out: list[str] = []
    if value_type(obj):
        documented = entries(sections(inspect.getdoc(obj) or "").get("Attributes", ""))
        out += [f"{where}: field {f} is not under Attributes" for f in fields_of(obj) if f not in documented]
    error_class = isinstance(obj, type) and issubclass(obj, BaseException)
    for name, func in members(obj):
        label = f"{where}.{name}" if name else where
        parts = sections(inspect.getdoc(func) or "")
        if name == "__init__":
            if value_type(obj) or error_class:
                continue  # a value type's fields are its Attributes; an error's constructor is its base's
            for title, body in sections(inspect.getdoc(obj) or "").items():  # its Args may be the class's
                parts[title] = body + parts.get(title, "")
        for title, body in parts.items():  # an entry at the title's own indent ends the section (napoleon)
            out += [f"{label}: {line.strip()[:40]!r} is not indented under {title}"
                    for line in body.splitlines() if line.strip() and not line[0].isspace()]
        signature = inspect.signature(func)
        documented = entries(parts.get("Args", ""))
        for param in signature.parameters.values():
            if param.name in ("self", "cls") or (param.kind is param.VAR_KEYWORD and param.name == "unknown"):
                continue
            if where.endswith(("connect", "Connection")) and param.name in OPTION_FIELDS - {"servers"}:
                continue
            star = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
            if star + param.name not in documented and param.name not in documented:
                out.append(f"{label}: parameter {param.name} is not under Args")
        returns = signature.return_annotation
        gives = name != "__init__" and returns not in (None, "None", inspect.Signature.empty)
        if gives and "Returns" not in parts and "Yields" not in parts:
            out.append(f"{label}: no Returns (or Yields)")
        if not error_class and "Raises" not in parts:
            out.append(f"{label}: no Raises")
    return out


@pytest.mark.parametrize(("where", "obj"), list(exported()), ids=[w for w, _ in exported()])
def test_docstring_gives_parameters_returns_and_raises(where: str, obj: Any) -> None:
    found = problems(where, obj)
    assert not found, "\n".join(found)


def test_the_checker_sees_a_missing_parameter() -> None:
    def documented(subject: str, timeout: float = 1.0) -> int:
        """Take one.

        Args:
            subject: where.

        Returns:
            One.

        Raises:
            jsclient.TimeoutError: never in time.
        """
        return 1

    assert problems("f", documented) == ["f: parameter timeout is not under Args"]


def test_the_checker_sees_an_entry_outside_its_section() -> None:
    def documented() -> None:
        """Do it.

        Raises:
            jsclient.TimeoutError: never in time.
        jsclient.Error: anything else.
        """

    assert problems("f", documented) == ["f: 'jsclient.Error: anything else.' is not indented under Raises"]
