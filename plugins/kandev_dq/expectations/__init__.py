"""kandev-dq's custom expectations, grouped by contract section.

Importing this package registers every expectation and facts metric with GX; it must happen
before any suite, checkpoint or data docs are loaded (GX drops unknown expectation types from
a suite silently), which :mod:`kandev_dq.gx.context` guarantees.

May import ``verdicts``, ``facts``, ``store``, ``sql``, ``contract``, ``errors`` and ``text``;
never the project, the records database or the GX seam above it.
"""

from kandev_dq.expectations import (
    activation,  # noqa: F401
    backfill,  # noqa: F401
    health,  # noqa: F401
    rows,  # noqa: F401
    schema,  # noqa: F401
    stored_text,  # noqa: F401
)
