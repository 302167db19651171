"""Orchestration: one check run (:mod:`.check`, through :mod:`kandev_dq.gx`), ``explain``
(without GX), a command's inputs checked before GX loads (:mod:`.inputs`), progress and
kandev-dq's own version.

May import every layer below it; only :mod:`.check` reaches GX.
"""
