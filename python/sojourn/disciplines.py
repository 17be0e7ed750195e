"""Disciplines written in Python (docs/python-disciplines.md).

A discipline is a class with this contract (:class:`Discipline`)::

    class MyAqm:
        def __init__(self, rng, **params): ...          # rng: sojourn's generator, seeded per link
        def enqueue(self, pkt, now_ns) -> bool: ...      # False: the packet is dropped
        def dequeue(self, now_ns) -> Packet | None: ...  # a packet it holds, or None
        def __len__(self) -> int: ...                    # packets it holds

Packets (:class:`Packet`) are read-only: ``length``, ``flow``, ``flow_hash``, ``src``,
``dst``, ``sport``, ``dport``, ``proto``, ``five_tuple``, ``dscp``, ``ecn``,
``enqueued_at_ns``, ``created_at_ns``, ``ct_bytes``, ``priority``, ``uid``; a discipline
may ``pkt.mark_ce()`` (True when the packet is ECN-capable) and ``pkt.drop(reason)``
(a packet it holds, e.g. at the head in ``dequeue``). Time is the engine's, in integer
nanoseconds; there is no wall clock. Randomness comes only from the ``rng`` handed to the
constructor (:class:`Rng`, sojourn's own xoshiro256++ seeded from the link's stream), so
the same file and seed give byte-identical outputs.

An experiment file names one as ``qdisc = { kind = "python", module = "my_aqm.py", class =
"MyAqm", ...its own parameters }`` (the module path relative to the file); from Python,
``sojourn.run(file, disciplines={"my_aqm": MyAqm})`` and ``qdisc = "my_aqm"``.
:class:`Resolver` imports the class and checks the contract before anything runs; a
mistake is one line naming the file, the class and the problem. A class that raises during
a run stops it with :class:`DisciplineError`, whose ``__cause__`` is the class's own
exception with its traceback; nothing is written.
"""
from __future__ import annotations

import importlib.util
import inspect
import keyword
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, Union, runtime_checkable

from . import _engine

Packet = _engine.Packet
Rng = _engine.Rng
DisciplineError = _engine.DisciplineError

#: Keys of a ``kind = "python"`` spec that are the engine's, not the class's parameters.
RESERVED_KEYS = ("kind", "module", "class")


@runtime_checkable
class Discipline(Protocol):
    """The contract a Python discipline fulfils (checked before a run by :class:`Resolver`)."""

    def enqueue(self, pkt: Packet, now_ns: int) -> bool:
        """Takes ``pkt`` at ``now_ns``: True if it holds it now, False if it drops it (the
        engine counts the drop as ``overlimit`` unless ``pkt.drop(reason)`` said why)."""
        ...

    def dequeue(self, now_ns: int) -> Optional[Packet]:
        """The next packet to send (one it holds, each at most once), or None."""
        ...

    def __len__(self) -> int:
        """Packets it holds."""
        ...

    # Optional: a ``bytes`` property (or attribute), the bytes it holds (``pkt.length``
    # summed); when present it is checked like ``__len__``.


class SpecError(ValueError):
    """A mistake in a Python discipline's spec: ``key`` (``module``, ``class``, a parameter,
    or "" for the spec itself) and ``msg``, which the engine reports at that key's path."""

    def __init__(self, key: str, msg: str):
        self.key, self.msg = key, msg
        super().__init__(f"{key}: {msg}" if key else msg)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _signature(f: Any) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):  # a builtin without a signature: cannot be checked
        return None


def check_contract(cls: Any, label: str, params: Mapping[str, Any]) -> None:
    """Raises :class:`SpecError` unless ``cls`` fulfils the contract: a class with
    ``enqueue(pkt, now_ns)``, ``dequeue(now_ns)`` and ``__len__``, whose constructor takes
    ``(rng, **params)`` and returns an empty discipline (``len() == 0``, ``dequeue``
    answers None, ``bytes`` 0 if it has one)."""
    if not isinstance(cls, type):
        raise SpecError("class", f"{label} is a {type(cls).__name__}, not a class")
    for name, args, shape in (("enqueue", 3, "(self, pkt, now_ns)"), ("dequeue", 2, "(self, now_ns)"),
                              ("__len__", 1, "(self)")):
        f = getattr(cls, name, None)
        if f is None or not callable(f):
            raise SpecError("class", f"{label} has no method {name}{shape} (the contract: enqueue(pkt, now_ns), "
                                     "dequeue(now_ns), __len__; docs/python-disciplines.md)")
        sig = _signature(f)
        if sig is not None:
            try:
                sig.bind(*([None] * args))
            except TypeError:
                raise SpecError("class", f"{label}.{name}{sig} does not take {shape}") from None
    sig = _signature(cls)
    rng = Rng(0)
    if sig is not None:
        try:
            sig.bind(rng, **dict(params))
        except TypeError as e:
            raise SpecError("", f"{label}{sig} cannot be called as {cls.__name__}(rng, "
                                f"{', '.join(f'{k}=…' for k in params)}): {e}") from None
    try:
        inst = cls(rng, **dict(params))
    except Exception as e:  # the user's code: its exception, in one line
        raise SpecError("", f"constructing {label} raised {_one_line(e)}") from None
    try:
        n = len(inst)
    except Exception as e:
        raise SpecError("class", f"len() of a new {label} raised {_one_line(e)}") from None
    if n != 0:
        raise SpecError("class", f"len() of a new {label} is {n}; a new discipline holds no packets (0)")
    try:
        first = inst.dequeue(0)
    except Exception as e:
        raise SpecError("class", f"dequeue(0) of a new {label} raised {_one_line(e)}") from None
    if first is not None:
        raise SpecError("class", f"dequeue(0) of a new {label} returned {first!r}; with no packet it must return None")
    if hasattr(inst, "bytes"):
        try:
            b = inst.bytes
        except Exception as e:
            raise SpecError("class", f"the bytes of a new {label} raised {_one_line(e)}") from None
        if b != 0 or isinstance(b, bool) or not isinstance(b, int):
            raise SpecError("class", f"the bytes of a new {label} is {b!r}; a new discipline holds 0 bytes")


class Resolver:
    """Binds the Python disciplines an experiment names to their classes, checking each
    up front (the engine calls :meth:`resolve` while it parses the experiment).

    ``base_dir``: where ``module`` paths resolve (the experiment file's directory);
    ``registered``: names given to classes from Python (``sojourn.run(...,
    disciplines={"my_aqm": MyAqm})``), which a spec may name as its ``kind``."""

    def __init__(self, base_dir: Union[str, Path], registered: Optional[Mapping[str, Any]] = None):
        self.base_dir = Path(base_dir)
        if registered is not None and not isinstance(registered, Mapping):
            raise SpecError("disciplines", f"expected a dict of name -> class, got {type(registered).__name__}")
        self._registered = dict(registered or {})
        builtin = {name for name, _ in _engine.qdiscs()}
        for name, cls in self._registered.items():
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
                raise SpecError("disciplines", f"{name!r} is not a usable name (a Python identifier, e.g. \"my_aqm\")")
            if name in builtin:
                raise SpecError("disciplines", f"{name!r} is a built-in discipline's name; choose another")
            if not isinstance(cls, type):
                raise SpecError("disciplines", f"{name!r} must name a class, got {type(cls).__name__}")
        self._modules: dict[Path, Any] = {}

    def registered(self, kind: str) -> bool:
        return kind in self._registered

    def _import(self, module: str) -> Any:
        path = (self.base_dir / module).resolve()
        if path in self._modules:
            return self._modules[path]
        if path.suffix != ".py":
            raise SpecError("module", f"{module}: expected a Python file (.py)")
        if not path.is_file():
            raise SpecError("module", f"{module}: no such file (looked in {self.base_dir})")
        name = f"sojourn_discipline_{abs(hash(str(path))):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise SpecError("module", f"{module}: cannot be imported")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses and pickling look classes up there
        try:
            spec.loader.exec_module(mod)
        except Exception as e:  # SyntaxError included: the user's file, in one line
            del sys.modules[name]
            raise SpecError("module", f"{module}: importing it raised {_one_line(e)}") from None
        self._modules[path] = mod
        return mod

    def resolve(self, path: str, module: Optional[str], cls_name: Optional[str],
                params: list[tuple[str, Any]]) -> tuple[Any, str, bool]:
        """``(class, label, needs_conntrack)`` for the spec at ``path``; :class:`SpecError`
        names the key at fault."""
        if module is None:
            if cls_name is None:
                raise SpecError("", 'a Python discipline needs `module` and `class` '
                                    '(e.g. { kind = "python", module = "my_aqm.py", class = "MyAqm" })')
            if cls_name not in self._registered:
                known = ", ".join(sorted(self._registered)) or "none"
                raise SpecError("module", f"missing: the Python file that defines {cls_name} (or register it: "
                                          f"sojourn.run(..., disciplines={{{cls_name!r}: {cls_name}}}); registered: {known})")
            cls = self._registered[cls_name]
            label = f"{getattr(cls, '__name__', cls_name)} (registered as {cls_name})"
        else:
            if cls_name is None:
                raise SpecError("class", f"missing: the class in {module} to run")
            mod = self._import(module)
            cls = getattr(mod, cls_name, None)
            if cls is None:
                classes = sorted(n for n, v in vars(mod).items() if isinstance(v, type) and not n.startswith("_")
                                 and getattr(v, "__module__", None) == mod.__name__)
                hint = f"; it defines {', '.join(classes)}" if classes else "; it defines no class"
                raise SpecError("class", f"{module} has no class {cls_name!r}{hint}")
            label = f"{cls_name} ({module})"
        kwargs = dict(params)
        check_contract(cls, label, kwargs)
        return cls, label, bool(getattr(cls, "needs_conntrack", False))
