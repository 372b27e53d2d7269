"""A small base for immutable, slotted records on the hook hot path.

``dataclasses`` (through ``inspect``) costs several milliseconds of import time on every hook
call, so the few records the hooks use (fill readings, tier policies, transcript cursors,
process witnesses) are plain slotted classes. This base gives them what a frozen dataclass
would: immutability, equality, hashing, a readable ``repr``, ``as_dict`` and ``replace``. Each
subclass lists its fields in ``__slots__`` (in order) and keeps its own validating ``__init__``,
which sets fields with :meth:`_set`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self


class FrozenRecord:
    """Immutable record over ``__slots__``: equality and hashing by field values."""

    __slots__ = ()

    def _set(self, **values: Any) -> None:
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot set {key}")

    def as_dict(self) -> dict[str, Any]:
        """The fields, in declaration order."""
        fields: tuple[str, ...] = self.__slots__
        return {key: getattr(self, key) for key in fields}

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (validated again by ``__init__``)."""
        return type(self)(**{**self.as_dict(), **changes})

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, FrozenRecord)
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"{type(self).__name__}({inner})"
