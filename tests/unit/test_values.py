"""`@frozen` answers ==, hash and repr as `@dataclass(frozen=True)` does, for less at import."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from dotlab_hpc.values import frozen


@frozen
class Value:
    name: str
    size: int = 0
    notes: tuple[str, ...] = field(default=(), compare=False)
    secret: str = field(default="", repr=False)
    weight: float = field(default=1.0, hash=False)


@dataclass(frozen=True)
class Twin:
    name: str
    size: int = 0
    notes: tuple[str, ...] = field(default=(), compare=False)
    secret: str = field(default="", repr=False)
    weight: float = field(default=1.0, hash=False)


@frozen
class Child(Value):
    extra: bool = False


Case = tuple[str, int, tuple[str, ...], str, float]
CASES: list[Case] = [
    ("a", 0, (), "", 1.0),
    ("a", 0, ("x",), "", 1.0),
    ("a", 1, (), "s", 1.0),
    ("a b", 0, (), "", 2.5),
    ("$(id)\n", -3, ("é",), "k", float("inf")),
]


@pytest.mark.parametrize("left", CASES)
@pytest.mark.parametrize("right", CASES)
def test_equality_and_hash_are_the_dataclass_ones(left: Case, right: Case) -> None:
    assert (Value(*left) == Value(*right)) is (Twin(*left) == Twin(*right))
    assert (Value(*left) != Value(*right)) is (Twin(*left) != Twin(*right))
    assert hash(Value(*left)) == hash(Twin(*left))


@pytest.mark.parametrize("case", CASES)
def test_repr_is_the_dataclass_one(case: Case) -> None:
    assert repr(Value(*case)) == repr(Twin(*case)).replace("Twin(", "Value(", 1)


def test_another_class_is_never_equal() -> None:
    twin: object = Twin("a")
    child: object = Child("a")
    assert Value("a") != twin
    assert Value("a") != child
    assert Value("a").__eq__(("a", 0)) is NotImplemented
    assert Child("a", extra=True) != Child("a")
    assert Child("a") == Child("a")
    assert (
        repr(Child("a", extra=True)) == "Child(name='a', size=0, notes=(), weight=1.0, extra=True)"
    )


def test_it_stays_a_frozen_dataclass() -> None:
    v = Value("a", 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del v.size
    assert [f.name for f in dataclasses.fields(v)] == ["name", "size", "notes", "secret", "weight"]
    assert dataclasses.replace(v, size=3) == Value("a", 3)
    assert dataclasses.asdict(v)["size"] == 2
    assert {v: 1}[Value("a", 2, ("ignored",))] == 1


def test_a_cycle_is_shown_not_followed() -> None:
    box: list[object] = []
    v = Value("a", notes=box)  # type: ignore[arg-type]
    box.append(v)
    assert repr(v) == "Value(name='a', size=0, notes=[...], weight=1.0)"


def test_the_package_defines_no_plain_frozen_dataclass() -> None:
    """Each frozen value class uses ``@frozen`` (slotted ones excepted: a new class is made)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "dotlab_hpc"
    found = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "@dataclass(frozen=True)\n" in p.read_text(encoding="utf-8")
    ]
    assert found == []
