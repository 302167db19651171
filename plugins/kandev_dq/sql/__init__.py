"""SQL pushed down to the store: dialect constructs (:mod:`.dialect`), the one message-to-row
mapping, counted scans and their listing queries.

May import ``contract``, ``errors`` and ``text``."""
