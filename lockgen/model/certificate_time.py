"""When a certificate's run started (`created`), as `lockgen verify` writes it: UTC, YYYY-MM-DDTHH:MM:SSZ in ASCII
digits, a date and time the calendar has (no 30 February, no second 60, no year 0). This is the one rule every
reader holds it to: the certificate's model validates `created` by `CREATED_PATTERN`, a regular expression rather
than a function so that a fleet's plain validation (`model.plain_certificate`, whose schema is kept as data)
carries it too, and every reader that needs the time (a fleet's ages, each export format) reads it by
`created_moment`. No command then takes a time another refuses."""

from __future__ import annotations

import datetime as dt
import re

CREATED_FORM = "YYYY-MM-DDTHH:MM:SSZ"

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001 to 9999: the calendar has no year 0
_FOURTH = "(?:0[48]|[2468][048]|[13579][26])"  # two digits, a multiple of 4 but 00
_LEAP_YEAR = f"(?:[0-9]{{2}}{_FOURTH}|{_FOURTH}00)"  # divisible by 4 but not by 100, or by 400
_DATE = (
    f"{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    f"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29"
)
# anchored: pydantic's (Rust) regex searches, and its `$` is the text's end (Python's fullmatch reads it so too)
CREATED_PATTERN = f"^(?:{_DATE})T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$"
_CREATED = re.compile(CREATED_PATTERN)


def created_moment(created: str) -> dt.datetime | None:
    """The UTC time `created` says, or None when it is not `CREATED_FORM` with a real date and time."""
    if _CREATED.fullmatch(created) is None:
        return None
    return dt.datetime(
        int(created[0:4]),
        int(created[5:7]),
        int(created[8:10]),
        int(created[11:13]),
        int(created[14:16]),
        int(created[17:19]),
        tzinfo=dt.timezone.utc,
    )


def created_text(moment: dt.datetime) -> str:
    """A UTC time written in `CREATED_FORM` (strftime's `%Y` writes the year 1 as `1`, which the rule refuses)."""
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"
