"""Every public call's docstring gives each parameter, the return value and the errors raised.

The docstrings are Google style (``Args:``, ``Returns:`` or ``Yields:``,
``Raises:``, and ``Attributes:`` for the fields of a value type), which the
API reference renders through Sphinx's napoleon.  One test per exported
name, so ``pytest -k JetStream`` checks one class.

Errors are written once: what every call of a class may raise (a closed
connection, a timeout, a refusal by the server, a bad argument) is the
class docstring's ``Every call may raise:`` section (docs/conf.py renders
it), and a method's ``Raises:`` lists only what is its own.  So a method
passes with a ``Raises:`` of its own, or with none when its class (or the
class it inherits the method from) has the shared section.  Every name
either section lists must be an exception, and an error a method raises by
name in its own body must be listed in one of them: so a method's own
error cannot go unlisted, nor can the shared section go while a method
relies on it.  What is exempt, and why:

* an exception class's constructor raises nothing of its own;
* ``connect()`` and ``Connection`` take the fields of :class:`Options` as
  keywords: those are documented once, as Options' attributes;
* an old name kept as a deprecated alias is documented by the new one.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

import jsclient
import jsclient.instrumentation
import jsclient.micro
import jsclient.spark

#: The class docstring's section of the errors every call of the class may raise (docs/conf.py renders it).
SHARED = "Every call may raise"
SECTION = re.compile(
    rf"^(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes|{SHARED}):\s*$", re.MULTILINE
)
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
    """The names a section describes: its lines ``name:``, ``name (type):`` or ``a, b:`` (napoleon gives each
    of several names the one description), with ``*`` kept."""
    found = re.findall(r"^\s{2,}(\*{0,2}\w+(?:, \*{0,2}\w+)*)(?:\s*\([^)]*\))?\s*:", section, re.MULTILINE)
    return {name for names in found for name in names.split(", ")}


def listed_errors(section: str) -> list[str]:
    """The names a Raises-like section lists: its entries at the section's own indent (continuations are deeper)."""
    lines = [line for line in section.splitlines() if line.strip()]
    indent = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    return [m.group(1) for line in lines if (m := re.match(rf"^\s{{{indent}}}([\w.]+)\s*:", line))]


def exception(name: str) -> type[BaseException] | None:
    """The exception ``name`` (``TimeoutError``, ``jsclient.TimeoutError``) means: jsclient's first, else a builtin."""
    last = name.rpartition(".")[2]
    found = getattr(jsclient, last, None) or getattr(builtins, last, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def raised_by_name(func: Callable[..., Any]) -> set[str]:
    """The jsclient errors ``func``'s own body raises by name (``raise StreamNotFoundError(...)``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = exc.id if isinstance(exc, ast.Name) else exc.attr if isinstance(exc, ast.Attribute) else ""
            if isinstance(getattr(jsclient, name, None), type) and issubclass(getattr(jsclient, name), BaseException):
                found.add(name)
    return found


def shared_errors(obj: Any, name: str) -> str:
    """The ``Every call may raise`` section of ``obj``, and of the class ``obj`` inherits method ``name`` from."""
    if not isinstance(obj, type):
        return ""
    owners = {obj: None} | {cls: None for cls in obj.__mro__ if name in vars(cls)}
    return "".join(sections(inspect.getdoc(cls) or "").get(SHARED, "") for cls in list(owners)[:2])


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
        if getattr(member, "__module__", "").split(".")[0] not in ("jsclient", "tests"):
            continue  # a builtin's or a library's (msgspec, enum) method (this file's checks its own examples)
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
        if error_class:
            continue
        shared = shared_errors(obj, name)
        if "Raises" not in parts and not shared:
            out.append(f"{label}: no Raises, and its class has no '{SHARED}' section")
        listed = listed_errors(parts.get("Raises", "")) + listed_errors(shared)
        out += [f"{label}: {entry} under Raises is not an exception" for entry in listed if exception(entry) is None]
        names = {entry.rpartition(".")[2] for entry in listed}
        out += [f"{label}: raises {error} but does not list it (nor does its class)"
                for error in sorted(raised_by_name(func) - names)]
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


def test_several_parameters_may_share_one_entry() -> None:
    def documented(subject: str, payload: bytes, timeout: float) -> None:
        """Send it.

        Args:
            subject, payload: As :meth:`publish`'s.

        Raises:
            jsclient.TimeoutError: never in time.
        """

    assert problems("f", documented) == ["f: parameter timeout is not under Args"]


def test_the_checker_sees_an_entry_outside_its_section() -> None:
    def documented() -> None:
        """Do it.

        Raises:
            jsclient.TimeoutError: never in time.
        jsclient.Error: anything else.
        """

    assert problems("f", documented) == ["f: 'jsclient.Error: anything else.' is not indented under Raises"]


class Shared:
    """A facade whose calls all ask a server.

    Every call may raise:
        jsclient.TimeoutError: No answer in time.
        ConnectionClosedError: The connection is closed.
    """

    def plain(self) -> None:
        """Only what every call may raise."""

    def own(self, name: str) -> None:
        """One error of its own.

        Args:
            name: which.

        Raises:
            StreamNotFoundError: No such stream.
        """
        if not name:
            raise jsclient.StreamNotFoundError(name)


def test_a_method_may_leave_its_errors_to_its_class() -> None:
    assert problems("Shared", Shared) == []


def test_the_checker_sees_a_class_section_removed() -> None:
    class Bare:
        def plain(self) -> None:
            """Only what every call may raise, but nothing says what that is."""

    assert problems("Bare", Bare) == ["Bare.plain: no Raises, and its class has no 'Every call may raise' section"]


def test_the_checker_sees_an_error_raised_by_name_but_not_listed() -> None:
    class Quiet(Shared):
        """A facade.

        Every call may raise:
            TimeoutError: No answer in time.
        """

        def lookup(self, name: str) -> None:
            """Look ``name`` up.

            Args:
                name: which.
            """
            if not name:
                raise jsclient.StreamNotFoundError(name)

    assert problems("Quiet", Quiet) == [
        "Quiet.lookup: raises StreamNotFoundError but does not list it (nor does its class)"
    ]


def test_the_checker_sees_a_listed_name_that_is_no_exception() -> None:
    def documented() -> None:
        """Do it.

        Raises:
            TimeoutErorr: never in time.
        """

    assert problems("f", documented) == ["f: TimeoutErorr under Raises is not an exception"]
