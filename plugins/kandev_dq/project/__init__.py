"""The project, read without GX: its files and what ``init`` writes into them, the vetting of a
project before GX loads it (the allowlist, docs/reliability.md 3a), the user's settings, and a
project's deviations from the rule index.

* :mod:`.settings`: every environment variable kandev-dq reads, in one precedence, and the
  store a command works on, read once into its reference.
* :mod:`.vetting`: what a project's ``great_expectations.yml`` may name, read as data.
* :mod:`.plan`: the suites and checkpoints ``init`` writes, as data.
* :mod:`.files`: finding a project, refusing its code, writing it (``init``).
* :mod:`.deviations`: how a project's suites differ from the plan.
* :mod:`.selection`: the part of a checkpoint ``check --suite``/``--rule`` runs.

May import ``errors``, ``text``, ``contract`` and ``store`` (the store reference); never GX, nor
the records database or anything above it.
"""
