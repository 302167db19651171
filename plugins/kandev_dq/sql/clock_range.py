"""Instants no clock can have written (CONTRACT §1 timestamps): read once, for the rule that
names them and for the backfill that refuses to copy them.

PostgreSQL's ``infinity`` and ``-infinity``, an instant before 0001-01-02 (the first one
kandev-dq compares exactly, as for keys) and one later than the reading's own clock plus a day
(a row or message dated in year 9999) all compare without error, so every rule would take them
for real instants. A day of tolerance covers a writer's clock running ahead of the check's.
"""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract.instants import KEY_RANGE, Instant, now_instant
from kandev_dq.sql.dialect import at_or_after, before, instant_param, recognised_utc_text

#: How far past the reading's own clock an instant may lie (a writer's clock running ahead).
FUTURE_TOLERANCE_NS = 24 * 3600 * 10**9


def beyond_any_clock(*columns) -> sa.ColumnElement[bool]:
    """Whether any of ``columns`` holds an instant no clock can have written, compared with the
    exact-instant constructs (AC-24e). SQLite text in no recognised form is another finding
    (:class:`~kandev_dq.sql.dialect.recognised_utc_text`) and is left out here."""
    horizon = instant_param("horizon", now_instant().shifted(FUTURE_TOLERANCE_NS))
    earliest = instant_param("earliest", Instant.from_datetime(KEY_RANGE[0]))
    return sa.or_(
        *(
            sa.and_(
                column.is_not(None),
                # The range first: it is cheap and false for nearly every value, so the
                # costlier form test runs only on the few values it keeps.
                sa.or_(before(column, earliest), at_or_after(column, horizon)),
                recognised_utc_text(column),
            )
            for column in columns
        )
    )
