"""The one GX seam at run time: every module that speaks GX's API.

* :mod:`.context`: loading a project as a GX file context, suites held whole.
* :mod:`.adapter`: GX internals kandev-dq relies on (the data source's connections, hearing
  each stored result, running and silencing actions, the validation results store, which docs
  pages a build renders), pinned in ``tests/test_gx_adapter.py``.
* :mod:`.checkpoint`: running a checkpoint, its progress, docs and notifications.
* :mod:`.results_store`, :mod:`.suites_store`: the stores a project's yml names.
* :mod:`.native_runs`: a run through GX's own API, named and recorded as ``check`` records its.
* :mod:`.notifications`: GX's notification actions, built from the settings.
* :mod:`.write_once`, :mod:`.live_window`: the metrics reading the records database.
* :mod:`.project_root`: the store that stops GX's ``project_root_dir`` at a project's ``gx/``.

May import every layer below it (``expectations``, ``records``, ``project`` and lower); only
``run/check.py`` and the layers above ``run`` import it.
"""
