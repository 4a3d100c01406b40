"""The runtime behind the typed config sections of halluflow.config_types (generated from the config schema).

Every section class there is a frozen dataclass without defaults: its defaults live only in
schemas/config.schema.yaml. `X.from_dict(mapping)` copies the mapping, completes it with the schema's defaults for
that section and validates it with halluflow.config's own default-filling validator (run on the section's subschema,
so a wrong key raises the same one-line ConfigError naming the dotted key as validate_config), then builds the
instance: nested sections become their classes, arrays tuples and open mappings read-only views. `Config.from_dict`
runs validate_config itself (schema and cross-key checks). `x.to_dict()` gives back plain dicts and lists equal to the
validated section.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin

from .errors import ConfigError

S = TypeVar("S", bound="Section")
ITEM = "[]"  # a path part: the items of an array (models.[] is one entry of models:)
ANY = "*"  # a path part: any key of a section whose keys all share one subschema (ode.sampling.sizes.*)


class Section:
    """Base of every generated section class (a frozen dataclass)."""

    # Where the section sits in the schema: ("ode", "filter"); ITEM for an array's entries; () for the whole config.
    _path: ClassVar[tuple[str, ...]] = ()
    # Keys the validated mapping did not have (a property without a schema default, an `if`/`then` branch that did
    # not apply): their fields hold None and to_dict leaves them out, so the round trip is exact.
    _absent: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_dict(cls: type[S], value: Mapping[str, Any] | S) -> S:
        """`value` itself when it is already an instance; else the mapping completed with the schema's defaults,
        validated (ConfigError naming the key) and built. The caller's mapping is not changed."""
        if isinstance(value, cls):
            return value
        key = dotted(cls._path)
        if not isinstance(value, Mapping) or isinstance(value, Section):
            kind = type(value).__name__
            raise ConfigError(f"config key {key!r}: expected a mapping of the {cls.__name__} section, got {kind}")
        if isinstance(value, dict):
            from .config import check_shape

            check_shape(value)  # before plain() copies it: aliases walked once, depth and integers bounded
        data = plain(value)
        if cls._path:
            _validate_section(data, cls._path)
        else:
            from .config import validate_config

            validate_config(data, _schema())
        return cls._build(data)

    @classmethod
    def _build(cls: type[S], data: dict) -> S:
        """The instance for a validated, defaulted mapping (no checks beyond unknown keys)."""
        shapes = _shapes(cls)
        unknown = data.keys() - shapes.keys()
        if unknown:
            names = ", ".join(sorted(f"{dotted(cls._path)}.{k}".lstrip(".") for k in unknown))
            raise ConfigError(f"config key {names!r}: unknown key (allowed here: {', '.join(shapes)})")
        kwargs = {}
        absent = []
        for name, shape in shapes.items():
            if name in data:
                kwargs[name] = _convert(shape, data[name])
            else:
                kwargs[name] = None
                absent.append(name)
        section = cls(**kwargs)
        if absent:
            object.__setattr__(section, "_absent", frozenset(absent))
        return section

    # __init__, equality, hash and repr are written once here rather than generated per class (dataclass
    # init/eq/repr=False): each generated method costs an exec() at import, and halluflow.config_types is imported at
    # every Snakemake parse (48 classes: 24 -> 8 ms CPU). The dataclass itself keeps the fields and frozenness.
    def __init__(self, **values: Any) -> None:
        names = _shapes(type(self))
        if values.keys() != names.keys():
            missing, extra = sorted(names.keys() - values.keys()), sorted(values.keys() - names.keys())
            raise TypeError(f"{type(self).__name__}: missing fields {missing}, unknown fields {extra}")
        for name in names:
            object.__setattr__(self, name, values[name])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _shapes(type(self)))

    def __hash__(self) -> int:
        return hash((type(self), *(getattr(self, name) for name in _shapes(type(self)))))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shapes(type(self)))
        return f"{type(self).__name__}({fields})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, equal to the validated mapping the section was built from."""
        return {
            name: thaw(getattr(self, name))
            for name in _shapes(type(self))
            if name not in self._absent or getattr(self, name) is not None
        }


def dotted(path: tuple[str, ...]) -> str:
    """The path as the dotted key an error names: models.*.name for a key of any models: entry."""
    return ".".join("*" if part == ITEM else part for part in path)


def plain(value: Any) -> Any:
    """A deep copy as plain JSON-like data: mappings to dicts, tuples to lists, sections to their dicts."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, (dict, Mapping)):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def thaw(value: Any) -> Any:
    """The plain data of a section field (the inverse of the freezing _convert does)."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def freeze(value: Any) -> Any:
    """Read-only data: dicts become read-only mapping views, lists tuples (all the way down)."""
    if isinstance(value, dict):
        return types.MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


# How a field's validated value becomes its typed value: (section class for a mapping, shape of an array's items).
Shape = tuple["type[Section] | None", "Shape | None"]


def _convert(shape: Shape, value: Any) -> Any:
    section, items = shape
    if section is not None and isinstance(value, dict):
        return section._build(value)
    if items is not None and isinstance(value, list):
        return tuple(_convert(items, v) for v in value)
    return freeze(value)


def _shape(annotation: Any) -> Shape:
    """The conversion a field's annotation asks for: a section class, a tuple of sections, or plain freezing."""
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return annotation, None
    if get_origin(annotation) is tuple:
        items = _shape(get_args(annotation)[0])
        return None, items if items != (None, None) else None
    if isinstance(annotation, types.UnionType) or get_origin(annotation) is Union:
        section = items = None
        for arg in get_args(annotation):
            s, i = _shape(arg)
            section, items = section or s, items or i
        return section, items
    return None, None


@cache
def _shapes(cls: type[Section]) -> dict[str, Shape]:
    return {f.name: _shape(f.type) for f in dataclasses.fields(cls)}


@cache
def _schema() -> dict:
    from .config import load_schema

    return load_schema()


@cache
def _validator():
    from .config import _DefaultFillingValidator

    return _DefaultFillingValidator(_schema())


@cache
def _subschema(path: tuple[str, ...]) -> dict:
    node = _schema()
    for part in path:
        if part == ITEM:
            node = node["items"]
        else:
            properties = node["properties"]
            node = next(iter(properties.values())) if part == ANY else properties[part]
    return node


def _validate_section(data: dict, path: tuple[str, ...]) -> None:
    """Fill the section's defaults into `data` and raise the first schema error, named by its full dotted key."""
    from .config import _message

    # descend keeps the root schema's resolver, so a $ref inside the section (ode.graph.extra_sources) resolves
    errors = list(_validator().descend(data, _subschema(path)))
    if errors:
        errors.sort(key=lambda e: (len(e.path), list(map(str, e.path))))
        error = errors[0]
        error.path.extendleft(reversed(dotted(path).split(".")))
        raise ConfigError(_message(error))
