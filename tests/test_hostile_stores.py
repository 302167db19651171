"""Hostile stores: a key of any SQL type, an instant out of range and a huge value are each a
finding, never a crash, an unevaluable rule or a result too big to keep."""

from __future__ import annotations

import errno

import pytest

from kandev_dq.contract.instants import CAPTURE_SINCE
from kandev_dq.run import ledger as ledgers
from kandev_dq.run.ledger import KeyLedger
from tests.test_reliability import CAPTURE, _keep_store_url, quick_project

__all__ = ["_keep_store_url", "quick_project"]  # fixtures this module uses from its neighbour


# --- keys of any SQL type, and the ledger ----------------------------------------------------


def test_a_ledger_write_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    ledger = KeyLedger(tmp_path / "key_ledger.json")
    ledger.record("store", {CAPTURE_SINCE: CAPTURE})

    def disk_full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ledgers.json, "dump", disk_full)
    with pytest.raises(OSError, match="No space"):
        ledger.record("another store", {CAPTURE_SINCE: CAPTURE})
    assert [p.name for p in tmp_path.iterdir()] == ["key_ledger.json"]
    assert ledger.first_seen("store") == {CAPTURE_SINCE: CAPTURE}
