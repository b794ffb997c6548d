"""The digests a lock's freshness is checked by (`core.lock.lock_meta`): the target's and the image's fields as it
digests them are pydantic's own JSON dump of the model the stack's rules validated, field for field, whatever they
state (the plain records past the boundary dump themselves)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockgen.core.lock.lock_meta import image_text, target_fields
from lockgen.core.stack import spec_models
from lockgen.model.spec import RESERVED_ENV, StackSpec, Target

PLATFORMS = ("linux-64", "linux-aarch64")


@st.composite
def targets(draw: st.DrawFn) -> spec_models.Target:
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
    return spec_models.Target(**fields)  # type: ignore[arg-type]


@given(targets())
def test_a_target_s_fields_are_its_json_dump_by_alias(validated: spec_models.Target) -> None:
    assert target_fields(spec_models.plain_record(validated)) == validated.model_dump(mode="json", by_alias=True)


@settings(deadline=None)  # the first example builds the settings validator
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "env": st.dictionaries(
                st.from_regex(r"[A-Z][A-Z0-9_]{0,5}", fullmatch=True).filter(
                    lambda key: key not in RESERVED_ENV  # PATH: refused by the settings, not this test's
                ),
                st.text(max_size=5),
            ),
            "workdir": st.just("/home/user"),
            "exposed-ports": st.lists(st.sampled_from((8888, "22/tcp", "53/udp")), max_size=3),
            "labels": st.dictionaries(st.sampled_from(("a", "org.x")), st.text(max_size=5)),
            "volumes": st.lists(st.sampled_from(("/data", "/models")), max_size=2),
            "services": st.dictionaries(st.sampled_from(("jupyter", "api")), st.just(("run", "x")), min_size=1),
        },
    )
)
def test_the_image_s_settings_are_their_json_dump_by_alias(settings: dict[str, object]) -> None:
    validated = spec_models.ImageSettings(**settings)  # type: ignore[arg-type]
    spec = StackSpec(name="s", python="3.12", targets=(), image=spec_models.plain_record(validated))
    dumped = validated.model_dump(mode="json", by_alias=True)
    assert json.loads(image_text(spec)) == {key: value for key, value in dumped.items() if key != "services" or value}


def test_a_field_json_does_not_hold_as_itself_is_refused_not_guessed_at() -> None:
    """A field of a type without a JSON form of its own (a date, as an exclude-newer is) is no silent new digest."""
    odd = Target(name="t", arch="cpu", glibc=dt.date(2025, 1, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no JSON form here"):
        target_fields(odd)
