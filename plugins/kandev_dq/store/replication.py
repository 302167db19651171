"""When a read began by the store's own clock, and how far a standby's replay lags.

A ``live`` run's watermark (where the next run's window starts, less the overlap) may never run
ahead of the data its snapshot holds. On a PostgreSQL primary that is the server's clock, read
before the snapshot begins (``now()``: the statement's, or the transaction's start). On a hot
standby it is the primary's commit time of the last transaction replayed
(``pg_last_xact_replay_timestamp()``), not any clock: a message committed on the primary while
replay lags is not in the snapshot yet, and a watermark taken from a clock would let the next
run's window start after it. SQLite has no server: the validator's clock, which shares the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.instants import utc_text


@dataclass(frozen=True)
class Standby:
    """A PostgreSQL hot standby's replay, as it reports it."""

    #: When the last transaction replayed committed on the primary (None: none replayed since
    #: the standby started, so the age of its data is unknown).
    last_replayed_commit: datetime | None
    #: The standby's clock less that commit time, in seconds (None with no commit replayed): an
    #: idle primary commits nothing, so this grows on a standby that is up to date too.
    lag_seconds: float | None
    #: Replay paused (``pg_wal_replay_pause()``).
    paused: bool
    #: All WAL received has been replayed.
    caught_up: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "last_replayed_commit": _text(self.last_replayed_commit),
            "lag_seconds": self.lag_seconds,
            "paused": self.paused,
            "caught_up": self.caught_up,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Standby:
        """A standby as :meth:`to_json` wrote it (a stored result's window)."""
        replayed = document.get("last_replayed_commit")
        return cls(
            datetime.fromisoformat(replayed) if replayed else None,
            document.get("lag_seconds"),
            bool(document.get("paused")),
            bool(document.get("caught_up")),
        )

    def text(self) -> str:
        """One line for a report: the lag and what it is measured from."""
        if self.last_replayed_commit is None:
            return "a standby that has replayed no transaction since it started"
        state = "replay paused" if self.paused else "caught up" if self.caught_up else "replaying"
        return (
            f"a standby {self.lag_seconds:.1f} s behind its primary (last replayed commit "
            f"{_text(self.last_replayed_commit)}, {state})"
        )


@dataclass(frozen=True)
class ServerClock:
    """The instant every change the snapshot can see was committed by (None: unknown, a standby
    that has replayed nothing yet), and the standby's replay where the store is one."""

    at: datetime | None
    standby: Standby | None = None


def server_clock(conn: sa.Connection) -> ServerClock:
    """The store's clock, read on ``conn`` before its snapshot begins (or as the first
    statement of it: PostgreSQL's ``now()`` is the transaction's start)."""
    if conn.dialect.name != "postgresql":
        return ServerClock(datetime.now(UTC))
    row = conn.exec_driver_sql(
        "SELECT pg_is_in_recovery(), now(), pg_last_xact_replay_timestamp(),"
        " CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() END,"
        " CASE WHEN pg_is_in_recovery()"
        " THEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() END"
    ).one()
    in_recovery, now, replayed, paused, caught_up = row
    if not in_recovery:
        return ServerClock(now.astimezone(UTC))
    lag = None if replayed is None else round((now - replayed).total_seconds(), 3)
    replayed = None if replayed is None else replayed.astimezone(UTC)
    return ServerClock(replayed, Standby(replayed, lag, bool(paused), bool(caught_up)))


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else utc_text(moment)
