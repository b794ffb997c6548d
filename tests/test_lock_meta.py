"""The digests a lock's freshness is checked by (`core.lock.lock_meta`): the target's fields as it digests them are
pydantic's own JSON dump of the target, field for field, whatever the target states."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockgen.core.lock.lock_meta import target_fields
from lockgen.model.spec import Target

PLATFORMS = ("linux-64", "linux-aarch64")


@st.composite
def targets(draw: st.DrawFn) -> Target:
    """Any target the stack's rules accept: a CPU one, or a GPU one with any of its optional fields."""
    gpu = draw(st.booleans())
    platforms = draw(st.none() | st.lists(st.sampled_from(PLATFORMS), min_size=1, max_size=2, unique=True))
    fields: dict[str, object] = {
        "name": draw(st.from_regex(r"[a-z][a-z0-9_.-]{0,8}", fullmatch=True)),
        "arch": draw(st.sampled_from(("sm80", "sm90", "sm100"))) if gpu else "cpu",
        "platforms": None if platforms is None else tuple(platforms),
        "glibc": draw(st.sampled_from(("2.17", "2.28", "2.35"))),
    }
    if gpu:
        fields["driver"] = draw(st.sampled_from(("550.54.15", "570.86", "580.65.06")))
        fields["cuda"] = draw(st.none() | st.sampled_from(("12.4", "12.8")))
        fields["cuda_compat"] = draw(st.sampled_from(("strict", "minor")))
        fields["allow_ptx_jit"] = draw(st.booleans())
    return Target(**fields)  # type: ignore[arg-type]


@given(targets())
def test_a_target_s_fields_are_its_json_dump_by_alias(target: Target) -> None:
    assert target_fields(target) == target.model_dump(mode="json", by_alias=True)


def test_a_field_json_does_not_hold_as_itself_is_refused_not_guessed_at() -> None:
    """A field of a type without a JSON form of its own (a date, as an exclude-newer is) is no silent new digest."""
    odd = Target.model_construct(name="t", arch="cpu", glibc=dt.date(2025, 1, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no JSON form here"):
        target_fields(odd)
