"""Sphinx configuration of jsclient's documentation (``make docs``; tests/test_docs.py builds it too).

The build runs with ``-W --keep-going -n``: every warning is an error and every cross-reference
must resolve.  Nothing here reaches the network (no intersphinx: the machines that build the docs
reach only package registries), so references to the standard library and to other packages are
let through by name below, each group with the reason.

Code examples: every ``.. code-block:: python`` in these pages is run by tests/test_docs.py, each
in a fresh interpreter against a real nats-server.  A block that is deliberately not runnable (a
fragment, a sketch that needs a Spark cluster, a WSGI app, ...) is preceded by the comment line
``.. no-run``, which renders as nothing::

    .. no-run

    .. code-block:: python

        handler(msg)   # shown, not run
"""

from __future__ import annotations

import builtins
import functools
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# docs/_ext: this site's own extensions (benchdata: the performance page's tables and charts, drawn from the
# benchmarks' committed JSON under docs/_data at every build).
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

import jsclient  # noqa: E402

project = "jsclient"
author = "the jsclient authors"
copyright = "the jsclient authors"
release = jsclient.__version__
version = ".".join(release.split(".")[:2])

# matplotlib's plot directive draws the guides' figures (``.. plot::``) at build time, among them the charts
# of ``.. bench:: FILE PART`` (docs/_ext/benchdata.py), which draws the benchmark results of docs/_data.
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "matplotlib.sphinxext.plot_directive", "benchdata"]
# Docstrings are Google style (Args, Returns, Raises, Attributes; tests/test_docstrings.py checks them).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# What every call of a class may raise is written once, in the class docstring's ``Every call may raise:``
# section (a method's ``Raises:`` lists only its own errors), rendered as a list of its entries like Args.
napoleon_custom_sections = [("Every call may raise", "params_style")]
bench_data_dir = "_data"
plot_formats = [("png", 100)]
plot_html_show_formats = False
plot_html_show_source_link = False

root_doc = "index"
exclude_patterns = ["_build", "_data", "_ext", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_theme = "furo"
html_title = f"jsclient {release}"
# Single backquotes (`name`), as some docstrings use them, are code, not an unresolved reference.
default_role = "literal"
nitpicky = True
# No "show source" copy of every page: a smaller, faster build.
html_copy_source = False
html_show_sourcelink = False

# Docstrings: prose with Sphinx roles, then Google sections (napoleon, above).
# Type hints stay in the signatures, where they are short (``StreamConfig``, not the module path).
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_class_signature = "mixed"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Defaults as the source writes them (``timeout=DEFAULT_TIMEOUT``), not as their repr.
autodoc_preserve_defaults = True
# Names the docs cannot resolve, with why.
#
# The standard library and third-party packages: there is no intersphinx inventory to link them to
# (no network), so their names in signatures and bases stay plain text.
_EXTERNAL = (
    r"(_thread|abc|argparse|collections|concurrent|contextlib|datetime|dt|email|enum|functools|io|"
    r"logging|os|pathlib|queue|re|socket|ssl|subprocess|threading|types|typing|typing_extensions|"
    r"weakref|hashlib|ipaddress|random|selectors|signal|struct|zoneinfo|json|base64|"
    r"msgspec|tenacity|nkeys|pyspark|pyarrow|pa|pandas|wsproto|opentelemetry|Future|Path|timedelta|datetime|"
    r"Enum|IntEnum|NamedTuple|Struct|RLock|Lock|Event|Thread|Condition|Semaphore|TracebackType|"
    r"Callable|Iterator|Iterable|Mapping|MutableMapping|Sequence|Generator|Any|Self|TypeVar|Generic|"
    r"BinaryIO|IO|RawIOBase|BufferedIOBase|_queue|_io|_collections_abc)(\..*)?"
)
# TypeVars (``T``) and the private helpers a public signature names (``_Window``): documented where
# they matter in prose, never as objects of their own.
_PRIVATE = r"(.*\.)?(_[A-Za-z0-9_]*|T|K|V|R|E)"
nitpick_ignore_regex = [
    (role, pattern)
    for role in ("py:class", "py:exc", "py:obj", "py:data", "py:func", "py:meth", "py:mod", "py:attr")
    for pattern in (_EXTERNAL, _PRIVATE)
]


# References the python domain does not find, resolved by what they name:
#
# * a reference by the module that defines an object (``jsclient.jetstream.context.JetStream``,
#   ``jsclient.jetstream.streamtypes.StreamConfig``) or by a name relative to the docstring's module
#   (``Msg``, ``msgopts.TTL``, ``:mod:`.pull```) goes to the one place the object is documented
#   (``jsclient.JetStream``, ``jsclient.jetstream.api.StreamConfig``): the reference pages document
#   each object once, under the name users import it by;
# * a reference to a jsclient object that exists but is not part of the reference (an internal base
#   class such as ``apicodec.APIStruct``, a module of the machinery under ``jsclient.core``, a type
#   alias) stays plain text, as a standard-library one does.
# A name that imports to nothing at all (a typo, a renamed function) is still a warning, so an error
# in the build.  tests/test_docs.py checks separately that every name in ``jsclient.__all__`` is in
# the built inventory.
@functools.cache
def _import(dotted: str) -> Any:
    if not dotted.startswith("jsclient"):
        return None
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj: Any = sys.modules.get(module) or importlib.import_module(module)
        except Exception:  # noqa: BLE001 - any name that does not import names nothing
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


_documented: dict[int, str] = {}
_documented_count = -1


def _documented_as(env: Any, obj: Any) -> str | None:
    global _documented_count
    py = env.get_domain("py")
    if _documented_count != len(py.objects):
        _documented.clear()
        _documented_count = len(py.objects)
        for name, entry in py.objects.items():
            if not name.startswith("jsclient") or entry.objtype not in ("class", "exception", "function", "module"):
                continue
            found = _import(name)
            if found is not None:
                _documented.setdefault(id(found), name)
    return _documented.get(id(obj))


def _candidates(node: Any) -> list[str]:
    target = node.get("reftarget", "").lstrip(".~")
    module = node.get("py:module") or ""
    cls = node.get("py:class") or ""
    if target.startswith("jsclient."):
        return [target]
    found = []
    if module.startswith("jsclient"):
        package = module if node.get("reftype") == "mod" else module.rpartition(".")[0]
        if cls:
            found.append(f"{module}.{cls}.{target}")
        found += [f"{module}.{target}", f"{package}.{target}"]
        owner = _import(f"{module}.{cls}") if cls else None
        if owner is not None and getattr(owner, "__module__", "").startswith("jsclient"):
            found.append(f"{owner.__module__}.{target}")
    # A name in a signature (a type alias such as ``HeadersInput``) is in scope in the module that
    # defines the function, which the reference node does not carry: any jsclient module that has it.
    found += [f"{name}.{target}" for name in sorted(sys.modules) if name.startswith("jsclient")]
    return found


def _resolve_alias(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    if node.get("refdomain") != "py":
        return None
    if node.get("reftarget", "").split("[")[0] in dir(builtins):
        return None
    py = env.get_domain("py")
    for candidate in _candidates(node):
        obj = _import(candidate)
        if obj is None:
            continue
        name = _documented_as(env, obj)
        if name is not None:
            newnode = node.deepcopy()
            newnode["reftarget"] = name
            newnode.attributes.pop("refspecific", None)
            for role in ("class", "func", "mod", "obj"):
                resolved = py.resolve_xref(env, node["refdoc"], app.builder, role, name, newnode, contnode)
                if resolved is not None:
                    return resolved
        return contnode
    return None


# The package's reference is generated from ``jsclient.__all__`` when the page is read, so a name
# exported tomorrow is documented tomorrow: the comment line ``.. jsclient-api: classes`` in
# reference/jsclient.rst becomes a section per topic with an ``autoclass`` (``autofunction``,
# ``autodata``) per name, ``.. jsclient-api: errors`` in reference/errors.rst the exception tree in the order
# jsclient/errors.py defines it.  An object exported by jsclient is documented there only: a member
# of another module's ``automodule`` is skipped, and an ``.. autoclass::`` of it on another reference
# page is dropped (with its section, when that leaves the section empty).
HOME_PAGES = ("reference/jsclient", "reference/errors")
TOPICS = (  # a topic's title, then the prefixes of the modules that define its objects
    (
        "Connecting",
        ("jsclient.connection", "jsclient.options", "jsclient.contexts", "jsclient.core", "jsclient.release"),
    ),
    (
        "Messages, subscriptions and replies",
        ("jsclient.message", "jsclient.headers", "jsclient.subscription", "jsclient.replies", "jsclient.futures"),
    ),
    (
        "Streams and consumers",
        (
            "jsclient.jetstream.api", "jsclient.jetstream.streamtypes", "jsclient.jetstream.consumertypes",
            "jsclient.jetstream.apienums", "jsclient.jetstream.handles", "jsclient.jetstream.pull",
            "jsclient.jetstream.push", "jsclient.jetstream.ordered",
        ),
    ),
    ("Key-value", ("jsclient.jetstream.kv",)),
    ("Object store", ("jsclient.jetstream.object",)),
    ("JetStream", ("jsclient.jetstream",)),
    ("Services", ("jsclient.micro",)),
    ("Message tracing", ("jsclient.msgtrace",)),
    ("Other", ("jsclient",)),
)


def _exported() -> set[int]:
    return {id(getattr(jsclient, name)) for name in jsclient.__all__ if not name.startswith("_")}


def _line(obj: Any) -> int:
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return 0


def _kind(obj: Any) -> str:
    if inspect.isclass(obj):
        return "class"
    return "function" if callable(obj) else "data"


def _api_rst(kind: str) -> str:
    objects = [(name, getattr(jsclient, name)) for name in jsclient.__all__ if not name.startswith("_")]
    errors = [
        (name, obj) for name, obj in objects
        if inspect.isclass(obj) and (issubclass(obj, BaseException) or obj.__module__ == "jsclient.errors")
    ]
    if kind == "errors":
        errors.sort(key=lambda item: _line(item[1]))
        return "\n".join(
            f".. auto{'exception' if issubclass(obj, BaseException) else 'class'}:: {name}\n" for name, obj in errors
        )
    rest = [(name, obj) for name, obj in objects if (name, obj) not in errors]
    out = []
    for title, prefixes in TOPICS:
        here = sorted(
            (name, obj) for name, obj in rest  # the last topic takes the rest (a type alias is the types module's)
            if title == TOPICS[-1][0] or any(getattr(obj, "__module__", "").startswith(prefix) for prefix in prefixes)
        )
        rest = [item for item in rest if item not in here]
        if here:
            out.append(f"{title}\n{'-' * len(title)}\n")
            out += [f".. auto{_kind(obj)}:: {name}\n" + _inherited(obj) for name, obj in here]
    return "\n".join(out)


def _inherited(obj: Any) -> str:
    """The option that documents what a class takes from a jsclient part that is not exported itself
    (JetStream's direct gets from Reads, a watcher's initial/stop from Watch), so none of its calls is missing."""
    exported = _exported()
    parts = [
        base for base in getattr(obj, "__mro__", ())[1:]
        if base.__module__.startswith("jsclient") and id(base) not in exported
    ]
    return "   :inherited-members:\n" if inspect.isclass(obj) and parts else ""


_GENERATE = re.compile(r"^\.\. jsclient-api: (\w+)[ \t]*$", re.M)
_AUTOCLASS = re.compile(r"^\.\. autoclass:: (\S+)\n(?:(?:   .*)?\n)*", re.M)
_EMPTY_SECTION = re.compile(r"^[^\n]+\n-{3,}\n\s*(?=^[^\n]+\n[-=]{3,}\n|\Z)", re.M)


def _skip_top_level_twice(app: Any, what: str, name: str, obj: Any, skip: bool, options: Any) -> bool | None:
    if what == "module" and id(obj) in _exported() and app.env.docname not in HOME_PAGES:
        return True
    # jsclient.jetstream.api's __all__ also names the codec's functions and constants, which other
    # clients' code never calls: its reference page documents the models.
    if what == "module" and app.env.docname == "reference/jetstream" and not inspect.isclass(obj):
        return True
    return None


def _reference_source(app: Any, docname: str, source: list[str]) -> None:
    if not docname.startswith("reference/"):
        return
    exported = _exported()
    text = _AUTOCLASS.sub(lambda m: "" if id(_import(m.group(1))) in exported else m.group(0), source[0])
    text = _GENERATE.sub(lambda m: _api_rst(m.group(1)), text)
    source[0] = _EMPTY_SECTION.sub("", text)


# An inherited method without a docstring of its own (ReplyFuture.result) would show the standard
# library's docstring, written for the standard library's docs and not valid here.
def _no_foreign_docstrings(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what != "method" or not lines or getattr(obj, "__doc__", "") is not None:
        return
    cls_name, _, attr = name.rpartition(".")
    cls = _import(cls_name)
    for base in getattr(cls, "__mro__", ())[1:]:
        if getattr(base.__dict__.get(attr), "__doc__", None):
            if not base.__module__.startswith("jsclient"):
                lines[:] = [f"As ``{base.__module__}.{base.__qualname__}.{attr}``.", ""]
            return


# A default that is not a Python expression (msgspec's ``<factory>``, an object's ``<...>`` repr)
# would make Sphinx give up parsing the whole signature and split it at every comma, so that
# ``dict[str, str]`` became two broken references; such a default is shown as ``...``.
_REPR = re.compile(r"<[^<>]*>")


def _parseable_defaults(
    app: Any, what: str, name: str, obj: Any, options: Any, signature: str | None, annotation: str | None
) -> tuple[str | None, str | None] | None:
    if signature and "<" in signature:
        return _REPR.sub("...", signature), annotation
    return None


# A builtin's name in a signature or a type field (``data: bytes``) names the builtin.  Left to the python
# domain, its fuzzy search would link it to any documented attribute of that name (``StreamState.bytes``,
# ``KeyValueStatus.bytes``), or warn when there are several: it is plain text, as the builtin resolver
# would make it.
def _builtins_stay_plain(app: Any, doctree: Any) -> None:
    from sphinx import addnodes

    for node in list(doctree.findall(addnodes.pending_xref)):
        if node.get("refdomain") == "py" and node.get("reftype") in ("class", "obj") and (
            node.get("reftarget") in dir(builtins)
        ):
            node.replace_self(node.children)


def setup(app: Any) -> None:
    app.connect("doctree-read", _builtins_stay_plain)
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-skip-member", _skip_top_level_twice)
    app.connect("autodoc-process-docstring", _no_foreign_docstrings)
    app.connect("source-read", _reference_source)
    app.connect("autodoc-process-signature", _parseable_defaults)
