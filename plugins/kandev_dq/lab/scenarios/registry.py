"""The scenario registry: what each named store is and what the suite must say about it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from kandev_dq.errors import KandevDqError, did_you_mean
from kandev_dq.store.reference import with_pg_option

NON_UTC_ZONE = "America/New_York"


@dataclass(frozen=True)
class Scenario:
    """A named store: the baseline plus one mutation, and what the suite must say about it.

    ``violates`` lists the AC ids a fault breaks (empty: a healthy scenario); ``severity`` is
    the severity a fault must be caught at, or for a healthy scenario the highest severity of
    the findings it ``discloses`` (the only non-error expectations it may fail; None: none).
    ``known_gap`` says why the current rules miss a fault: the scenario stays as it is, the
    matrix shows the miss, and the test fails once the gap closes (so the note goes too).
    """

    name: str
    summary: str
    build: Callable[[sa.Engine], None]
    violates: tuple[str, ...] = ()
    severity: str | None = None
    discloses: tuple[str, ...] = ()
    between_runs: Callable[[sa.Engine], None] | None = None
    check_url: Callable[[str], str] | None = None
    known_gap: str = ""

    @property
    def fault(self) -> bool:
        return bool(self.violates)

    @property
    def expected(self) -> str:
        """The expectation in plain words, for terminals, pipes and logs."""
        return self.expected_text(markdown=False)

    def expected_text(self, *, markdown: bool) -> str:
        """The expectation in words; ``markdown`` sets the known-gap label in bold."""
        if self.fault:
            label = "**known gap**" if markdown else "known gap"
            gap = f"; {label}: {self.known_gap}" if self.known_gap else ""
            return f"fault: {', '.join(self.violates)} at {self.severity}{gap}"
        if self.discloses:
            return f"healthy; discloses {self.severity}"
        return "healthy"


SCENARIOS: dict[str, Scenario] = {}


def registered(
    name: str,
    summary: str,
    *,
    violates: tuple[str, ...] = (),
    severity: str | None = None,
    discloses: tuple[str, ...] = (),
    between_runs: Callable[[sa.Engine], None] | None = None,
    check_url: Callable[[str], str] | None = None,
    known_gap: str = "",
) -> Callable[[Callable[[sa.Engine], None]], Callable[[sa.Engine], None]]:
    def register(build: Callable[[sa.Engine], None]) -> Callable[[sa.Engine], None]:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} is registered twice")
        SCENARIOS[name] = Scenario(
            name, summary, build, violates, severity, discloses, between_runs, check_url, known_gap
        )
        return build

    return register


def with_pg_options(url: str, option: str) -> str:
    """``url`` with a libpq ``-c`` option added to its ``options`` (PostgreSQL URLs only)."""
    if "://" not in url:
        return url
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    return with_pg_option(parsed, option).render_as_string(hide_password=False)


def non_utc_session(url: str) -> str:
    """The check runs in a PostgreSQL session whose time zone is not UTC (SQLite: as is)."""
    return with_pg_options(url, f"-cTimeZone={NON_UTC_ZONE}")


def get(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KandevDqError(
            f"no scenario {name!r}; `kandev-dq scenarios list` names them all"
            + did_you_mean(name, SCENARIOS)
        ) from None
