"""The activation keys as stored in ``kandev_meta`` (CONTRACT §5), read by the runner and the
checks alike."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract.instants import ACTIVATION_KEYS
from kandev_dq.contract.tables import kandev_meta


def read_keys(conn: sa.Connection) -> dict[str, str | None]:
    """The three activation keys as stored, in one statement (None = absent, AC-24c).

    A store without ``kandev_meta`` (before the runner's first step) has every key absent.
    """
    keys: dict[str, str | None] = dict.fromkeys(ACTIVATION_KEYS)
    if not sa.inspect(conn).has_table(kandev_meta.name):
        return keys
    rows = conn.execute(
        sa.select(kandev_meta.c.key, kandev_meta.c.value).where(
            kandev_meta.c.key.in_(ACTIVATION_KEYS)
        )
    )
    keys.update({key: value for key, value in rows})
    return keys
