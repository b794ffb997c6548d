"""The formats a certificate is rendered in for fleet tools (`lockgen cert export`, `lockgen verify --emit`),
as constants light enough for the command line to import at start-up."""

from __future__ import annotations

import datetime as dt

EXPORT_FORMATS = ("prom", "nfd", "npd", "junit")
FILE_FORMATS = ("prom", "nfd", "junit")  # npd is a line and an exit status for Node Problem Detector, not a file
LOCK_BOUND_FORMATS = ("nfd",)  # they name the lock the node is certified for: a run without one cannot write them
NFD_VALID_FOR = dt.timedelta(days=7)  # how long after the certificate's run its node features stay valid
VALID_FOR_UNITS = {  # `--valid-for`'s units: a count and one of them (30m, 12h, 7d, 2w)
    "m": dt.timedelta(minutes=1),
    "h": dt.timedelta(hours=1),
    "d": dt.timedelta(days=1),
    "w": dt.timedelta(weeks=1),
}


def valid_for_text(valid_for: dt.timedelta) -> str:
    """`--valid-for` as it is written for `valid_for`, in its largest unit that divides it (14 days: `2w`), so a
    command suggested to render again gives the features the lifetime the first rendering had."""
    for unit in ("w", "d", "h"):
        if not valid_for % VALID_FOR_UNITS[unit]:
            return f"{valid_for // VALID_FOR_UNITS[unit]}{unit}"
    return f"{-(-valid_for // VALID_FOR_UNITS['m'])}m"  # a part of a minute (only through the API) rounded up
