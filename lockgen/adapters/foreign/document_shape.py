"""The shape a foreign lock's parsed document must have where its reader reads it: each key's type (text, a
table, an array of tables...) and the keys a table must hold, judged before the reader walks it, so a file
edited out of shape is one refusal naming the key by its place in the file (`packages[0].wheels[1].url`) and the
type it holds in the file's own words (TOML's tables and arrays, YAML's mappings and lists), never the words of
the Python a reader tripped over. Keys no reader reads are not judged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from lockgen.errors import LockFormatError
from lockgen.model.names import shown

T = TypeVar("T")


@dataclass(frozen=True)
class Shape:
    """What a value must be: `name`, as an error says it ("text", "an array of tables"), and its test; for an
    array, or a table of like values, the shape of `each` item; for a table of known keys, their shapes
    (`keys`) and those it must hold (`required`)."""

    name: str
    holds: Callable[[object], bool]
    each: Shape | None = None
    keys: Mapping[str, Shape] = field(default_factory=dict)
    required: tuple[str, ...] = ()


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_table(value: object) -> bool:
    return isinstance(value, Mapping)


def _is_array(value: object) -> bool:
    return isinstance(value, list)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_scalar(value: object) -> bool:
    return isinstance(value, str) or _is_number(value)


TEXT = Shape("text", _is_text)
SCALAR = Shape("text or a number", _is_scalar)  # a version YAML may read as a number


@dataclass(frozen=True)
class Words:
    """A format's words for its containers: TOML's `table` and `array`, YAML's `mapping` and `list`."""

    table: str
    array: str

    def table_of(
        self, keys: Mapping[str, Shape] | None = None, required: tuple[str, ...] = (), each: Shape | None = None
    ) -> Shape:
        """A table of known `keys` (those `required` among them), or of like values (`each`)."""
        name = f"a {self.table}" if each is None else f"a {self.table} of {_plural(each.name, self)}"
        return Shape(name, _is_table, each, keys or {}, required)

    def array_of(self, each: Shape) -> Shape:
        return Shape(f"{_article(self.array)} {self.array} of {_plural(each.name, self)}", _is_array, each)

    def value_of(self, value: object) -> str:
        """`value` as a person reads it in an error: text and numbers as the file holds them (escaped), anything
        else by its type in these words."""
        if isinstance(value, str):
            return f"`{shown(value)}`"
        if _is_number(value):
            return str(value)
        return self.type_of(value)

    def type_of(self, value: object) -> str:
        """`value`'s type in these words (what the file holds where another belongs)."""
        if value is None:
            return "empty (null)"
        if isinstance(value, bool):
            return "a boolean"
        if _is_number(value):
            return "a number"
        if isinstance(value, str):
            return "text"
        if isinstance(value, list):
            return f"{_article(self.array)} {self.array}"
        if isinstance(value, Mapping):
            return f"a {self.table}"
        return "a date or time"


TOML = Words("table", "array")
YAML = Words("mapping", "list")


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _plural(name: str, words: Words) -> str:
    """ "a table" -> "tables", "text" -> "text", "an array of text" -> "arrays of text"."""
    head, _, rest = name.partition(" of ")
    for noun in (words.table, words.array):
        if head in (f"a {noun}", f"an {noun}"):
            return f"{noun}s" + (f" of {rest}" if rest else "")
    return name


def check_shape(value: object, shape: Shape, what: str, hint: str, words: Words) -> None:
    """Refuses the document `value` of the file `what` names unless it has `shape`, down to every key and item the
    shape names: one `LockFormatError` naming the first place that does not, in the file's `words`."""
    _check(value, shape, "", what, hint, words)


def read_in_shape(read: Callable[[], T], document: object, shape: Shape, what: str, hint: str, words: Words) -> T:
    """`read()` of `document`; where the reader trips over the document (a key missing, a value of another type)
    the document's shape is judged and the first place out of shape refused in the file's words (the document is
    walked only then: a large lock read whole pays nothing). A document in shape re-raises what `read` raised."""
    try:
        return read()
    except TRIPS:
        check_shape(document, shape, what, hint, words)
        raise


# what a reader raises where it trips over a document out of shape (StopIteration: a next())
TRIPS = (KeyError, TypeError, ValueError, AttributeError, IndexError, StopIteration)


def _check(value: object, shape: Shape, place: str, what: str, hint: str, words: Words) -> None:
    if not shape.holds(value):
        where = f"`{shown(place)}`" if place else "document"
        raise LockFormatError(f"the {what}'s {where} is {words.type_of(value)}, not {shape.name}", hint)
    if isinstance(value, Mapping):
        for key in shape.required:
            if key not in value:
                named = f"`{shown(place)}`" if place else "document"
                raise LockFormatError(f"the {what}'s {named} has no `{key}` ({shape.keys[key].name})", hint)
        for key, inner in shape.keys.items():
            if key in value:
                _check(value[key], inner, f"{place}.{key}" if place else key, what, hint, words)
        if shape.each is not None:
            for key, item in value.items():
                _check(item, shape.each, f"{place}.{key}" if place else str(key), what, hint, words)
    elif isinstance(value, list) and shape.each is not None:
        for index, item in enumerate(value):
            _check(item, shape.each, f"{place}[{index}]", what, hint, words)
