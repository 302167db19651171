"""The store: its reference (one ``StoreRef`` per store, built at the edge), opening it, the
pinned read-only snapshot, schema observation and replication.

May import ``sql``, ``contract``, ``errors`` and ``text``."""
