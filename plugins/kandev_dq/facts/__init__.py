"""The facts: one family of facts per query set, read from the store (read-only).

May import ``store``, ``sql``, ``contract``, ``errors`` and ``text``; never ``migration`` (its
peer, the writer)."""
