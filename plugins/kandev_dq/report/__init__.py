"""What runs are shown as: data docs (the build, the overview, the timeline chart, the GX site
seam), history, the audit bundle, the coverage table, JUnit XML and Prometheus metric families.

May import ``run``, ``gx`` and every layer below them; it speaks GX in ``gx_site.py`` and the
overview page alone."""
