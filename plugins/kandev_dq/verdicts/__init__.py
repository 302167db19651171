"""Each rule's verdict, without GX: the family of facts it judges, its arguments, ``judge``.

Importing this package registers every verdict in :data:`kandev_dq.verdicts.base.VERDICTS`,
keyed by its expectation's name. The GX expectations (:mod:`kandev_dq.expectations`) delegate
to these; ``kandev-dq explain`` judges with them directly, without importing GX.

May import ``facts``, ``store``, ``sql``, ``contract``, ``errors`` and ``text``; never GX.
"""

from kandev_dq.verdicts import (
    activation,  # noqa: F401
    backfill,  # noqa: F401
    health,  # noqa: F401
    rows,  # noqa: F401
    schema,  # noqa: F401
    stored_text,  # noqa: F401
)
from kandev_dq.verdicts.base import VERDICTS, Verdict


def verdict_of(expectation: str) -> type[Verdict]:
    """The verdict class of ``expectation`` (KeyError for a name no rule has)."""
    return VERDICTS[expectation]
