"""The migration runner, its steps and its plan: the one part of kandev-dq that writes to a store.

May import ``store``, ``sql``, ``contract``, ``errors`` and ``text``; never ``facts`` (its peer,
the checker)."""
