"""The lab: sample stores, the fault corpus, the upstream-shaped builder and the demo.

May import every layer up to ``report``; only the CLI imports it."""
