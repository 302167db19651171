"""The few constructs that differ between SQLite and PostgreSQL, one module per concept.

Every query in kandev-dq reaches timestamps, message metadata and dialect-specific plans only
through these. Each construct is one SQLAlchemy element with one ``@compiles`` function per
dialect; the pieces both dialects share never ask which dialect they write for.

* :mod:`~kandev_dq.sql.dialect.instants` — exact UTC instants (CONTRACT §1, §5, AC-24e).
* :mod:`~kandev_dq.sql.dialect.json_documents` — metadata read as JSON (AC-23b, AC-19).
* :mod:`~kandev_dq.sql.dialect.json_names` — escaped and repeated member names (AC-19).
* :mod:`~kandev_dq.sql.dialect.ids` — id lists bound as one parameter, canonical UUIDs.
* :mod:`~kandev_dq.sql.dialect.fences` — planner fences.
* :mod:`~kandev_dq.sql.dialect.upsert` — insert-if-absent (AC-24 write-once).
* :mod:`~kandev_dq.sql.dialect.traits` — what a store's dialect does differently, for the
  code above ``sql/`` that must choose (it never tests the dialect's name itself).
"""

from kandev_dq.sql.dialect.fences import computed_once, index_reads, once_per_row
from kandev_dq.sql.dialect.ids import canonical_uuid, driving_ids, looked_up, one_of
from kandev_dq.sql.dialect.instants import (
    InstantParam,
    at_or_after,
    before,
    instant_param,
    instants_differ,
    recognised_utc_text,
    utc_instant,
    utc_instant_latest,
)
from kandev_dq.sql.dialect.json_documents import (
    JSON_MAX_DEPTH,
    PG_PARSED_BYTES,
    json_filled_text,
    json_flag,
    json_number,
    json_text,
    metadata_doc,
    metadata_text,
    metadata_too_deep,
    stored_not_as_text,
)
from kandev_dq.sql.dialect.json_names import (
    exact_walk_needed,
    may_hold_string,
    repeated_member,
    unpaired_names,
)
from kandev_dq.sql.dialect.traits import StoreTraits, server_version, store_traits
from kandev_dq.sql.dialect.upsert import insert_if_absent

__all__ = [
    "JSON_MAX_DEPTH",
    "PG_PARSED_BYTES",
    "InstantParam",
    "StoreTraits",
    "at_or_after",
    "before",
    "canonical_uuid",
    "computed_once",
    "driving_ids",
    "exact_walk_needed",
    "index_reads",
    "insert_if_absent",
    "instant_param",
    "instants_differ",
    "json_filled_text",
    "json_flag",
    "json_number",
    "json_text",
    "looked_up",
    "may_hold_string",
    "metadata_doc",
    "metadata_text",
    "metadata_too_deep",
    "once_per_row",
    "one_of",
    "recognised_utc_text",
    "repeated_member",
    "server_version",
    "store_traits",
    "stored_not_as_text",
    "unpaired_names",
    "utc_instant",
    "utc_instant_latest",
]
