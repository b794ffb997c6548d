"""The formats a certificate is rendered in for fleet tools (`lockgen cert export`, `lockgen verify --emit`),
as constants light enough for the command line to import at start-up."""

from __future__ import annotations

import datetime as dt

EXPORT_FORMATS = ("prom", "nfd", "npd", "junit")
FILE_FORMATS = ("prom", "nfd", "junit")  # npd is a line and an exit status for Node Problem Detector, not a file
LOCK_BOUND_FORMATS = ("nfd",)  # they name the lock the node is certified for: a run without one cannot write them
NFD_VALID_FOR = dt.timedelta(days=7)  # how long after the certificate's run its node features stay valid
