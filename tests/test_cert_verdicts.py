"""A certificate's time held to one rule (`model.certificate_time`) by the model, the plain validation a fleet's
status makes, a fleet's ages and every export format."""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings, strategies as st
from pydantic import ValidationError
from pydantic_core import ValidationError as CoreValidationError

from lockgen.adapters.node.kept_schema import plain_body
from lockgen.core.certificate.cert_formats import junit_report, nfd_features, npd_status, prometheus_text
from lockgen.core.fleet.fleet_status import moment
from lockgen.errors import LockFormatError, UserError
from lockgen.model.certificate import CertificateBody
from lockgen.model.certificate_time import created_moment, created_text
from tests.conftest import REPO

TEMPLATE = REPO / "envs" / "examples" / "h200-system" / "h200-lock-full.cert.json"  # passed, bound to a lock
XS_DATETIME = re.compile(r"-?[0-9]{4,}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")  # JUnit's timestamp


def _body(**changes: object) -> dict:
    body: dict = json.loads(TEMPLATE.read_text())["certificate"]
    return {**body, **changes}


NEAR_TIMES = st.builds(
    lambda year, month, day, hour, minute, second, digit: (
        f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z".replace("1", digit)
    ),
    st.integers(0, 10_000),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 61),
    st.sampled_from(["1", "1", "1", "\uff11", "\u0661", "x"]),  # ASCII, or a digit elsewhere in Unicode
)
ANY_TIME = st.one_of(
    NEAR_TIMES,
    st.datetimes(min_value=dt.datetime(1, 1, 1)).map(lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")),
    st.text(max_size=24),
    st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\n?", fullmatch=True),
)
BODY = _body()


def _strict(created: str) -> dt.datetime | None:
    """The rule as stated: YYYY-MM-DDTHH:MM:SSZ in ASCII digits, a date and time Python's calendar has."""
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", created, re.ASCII) is None:
        return None
    try:
        return dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


@settings(max_examples=400, deadline=None)
@given(created=ANY_TIME)
def test_one_time_rule_for_every_reader(created: str) -> None:
    """Any text as a certificate's time: either a time every reader takes alike, or refused by each as a
    LockFormatError or a UserError, never another exception. Failed before: the model took any text, npd printed
    it, junit took fullwidth digits (strptime's), a fleet's status refused what the others took."""
    found = created_moment(created)
    assert found == _strict(created)
    assert found is None or created_text(found) == created  # the form it is written in, read back
    try:
        body = CertificateBody.model_validate({**BODY, "created": created})
    except ValidationError:
        body = None
    assert (body is not None) == (found is not None)
    try:
        plain_body(json.dumps({**BODY, "created": created}))
        plain = True
    except CoreValidationError:
        plain = False
    assert plain == (found is not None)  # a fleet's plain validation carries the rule as data
    try:
        assert moment(created) == found
    except LockFormatError:
        assert found is None
    made = CertificateBody.model_validate(BODY).model_copy(update={"created": created})  # unvalidated, as in code
    for render_one in (prometheus_text, nfd_features, npd_status, junit_report):
        try:
            render_one(made)
        except (LockFormatError, UserError):
            assert found is None, render_one
        else:
            assert found is not None, render_one


def test_the_earliest_year_is_written_in_four_digits() -> None:
    """Failed before: JUnit's timestamp of the year 1 was `1-01-01T00:00:00`, no xs:dateTime; NFD's expiry too."""
    body = CertificateBody.model_validate({**BODY, "created": "0001-01-01T00:00:00Z"})
    suite = ET.fromstring(junit_report(body)).find("testsuite")
    assert suite is not None and suite.get("timestamp") == "0001-01-01T00:00:00"
    assert XS_DATETIME.fullmatch(suite.get("timestamp") or "")
    assert "# +expiry-time=0001-01-08T00:00:00Z" in nfd_features(body)
    assert "(run 0001-01-01T00:00:00Z" in npd_status(body)


