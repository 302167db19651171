"""GX's validation results, kept in the records database: a GX ``StoreBackend`` over SQLAlchemy.

GX 1.24 keeps validation results on the filesystem or in its cloud only. A project names this
backend for its ``ValidationResultsStore`` (``great_expectations.yml``, written by
``kandev-dq init``)::

    validation_results_store:
      module_name: kandev_dq.run.results_store
      class_name: ValidationResultsStore
      store_backend:
        module_name: kandev_dq.run.results_store
        class_name: RecordsStoreBackend

and GX's own machinery (checkpoints, data docs, ``get_validation_result``) reads and writes
results through it, one row per GX key in :data:`kandev_dq.run.records.results`. The database is
the project's records database (:func:`kandev_dq.run.records.records_url`); an optional ``url``
in the backend's config is the project's setting for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.store import validation_results_store as gx_results
from great_expectations.data_context.store.store_backend import StoreBackend
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)
from great_expectations.exceptions import InvalidKeyError

from kandev_dq.run.records import Records, records_url
from kandev_dq.run.results import suite_success


class RecordsStoreBackend(StoreBackend):
    """A key-value store of GX key tuples to serialized results, in the records database."""

    def __init__(
        self,
        url: str | None = None,
        root_directory: str | None = None,
        data_context: Any = None,
        fixed_length_key: bool = False,
        suppress_store_backend_id: bool = False,
        manually_initialize_store_backend_id: str = "",
        store_name: str | None = None,
    ) -> None:
        super().__init__(
            fixed_length_key=fixed_length_key,
            suppress_store_backend_id=suppress_store_backend_id,
            manually_initialize_store_backend_id=manually_initialize_store_backend_id,
            store_name=store_name,
        )
        self._url = url
        self._root = Path(root_directory) if root_directory else Path.cwd()
        self._records: Records | None = None
        self._owned = False
        self._config = {
            "module_name": type(self).__module__,
            "class_name": type(self).__name__,
            **({"url": url} if url else {}),
        }

    # --- the records database this backend writes to ------------------------------------------

    @property
    def records(self) -> Records:
        """The records database: the one kandev-dq attached (``--records`` included), else the
        project's (:func:`~kandev_dq.run.records.records_url`), opened on first use."""
        if self._records is None:
            self._records = Records(records_url(self._root))
            self._owned = True
        return self._records

    def attach(self, records: Records) -> None:
        """Use an already open records database (the caller disposes it)."""
        self.close()
        self._records, self._owned = records, False

    def close(self) -> None:
        if self._records is not None and self._owned:
            self._records.dispose()
        self._records, self._owned = None, False

    # --- GX's StoreBackend interface -------------------------------------------------------------

    def _validate_value(self, value) -> None:
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"{type(self).__name__} stores serialized text, not {type(value)}")

    def _get(self, key, **kwargs):
        value = self.records.get_result(tuple(key))
        if value is None:
            raise InvalidKeyError(f"no validation result {key} in the records database")
        return value

    def _get_all(self) -> list[Any]:
        return [self._get(k) for k in self.list_keys()]

    def _set(self, key, value, **kwargs):
        text = value.decode("utf-8") if isinstance(value, bytes) else value
        self.records.put_result(tuple(key), text)
        return key

    def _move(self, source_key, dest_key, **kwargs) -> None:
        self._set(dest_key, self._get(source_key))
        self.records.remove_result(tuple(source_key))

    def list_keys(self, prefix=()) -> list[tuple]:
        prefix = tuple(prefix)
        return [
            key
            for key in self.records.result_keys()
            if key != self.STORE_BACKEND_ID_KEY and key[: len(prefix)] == prefix
        ]

    def _has_key(self, key) -> bool:
        return self.records.get_result(tuple(key)) is not None

    def remove_key(self, key) -> bool:
        key = key.to_tuple() if hasattr(key, "to_tuple") else tuple(key)
        return self.records.remove_result(key)

    @property
    def config(self) -> dict:
        return self._config


#: How GX writes a run time into a result key (``RunIdentifier.to_tuple``).
RUN_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"


class ValidationResultsStore(gx_results.ValidationResultsStore):
    """GX's validation results store, reading its keys back without re-parsing them.

    It keeps GX's class name: GX's config replaces a project's results store with an in-memory
    one unless some store's ``class_name`` is exactly ``ValidationResultsStore``
    (``DataContextConfig._init_stores``), and results would then be silently lost.

    GX turns every stored key into an identifier on each ``list_keys`` (a docs build lists them
    six times) and parses each run time with dateutil: with a long history that alone grew a
    check's docs build by seconds. Keys are identical either way: the run time GX itself wrote
    is read with its own format, and each key is built once per store instance.
    """

    def __init__(self, store_backend=None, runtime_environment=None, store_name=None) -> None:
        super().__init__(
            store_backend=store_backend,
            runtime_environment=runtime_environment,
            store_name=store_name,
        )
        self._keys: dict[tuple, Any] = {}
        self._listing: list | None = None

    def list_keys(self) -> list:
        """GX's listing of every stored key, unless a bounded window is in force
        (:meth:`listing_only`)."""
        if self._listing is not None:
            return list(self._listing)
        return super().list_keys()

    @contextmanager
    def listing_only(self, keys: list) -> Iterator[None]:
        """List only ``keys`` meanwhile: GX's page builders list the whole store to render a
        few pages of it, a cost growing with the history; kandev-dq gives them the window."""
        self._listing = list(keys)
        try:
            yield
        finally:
            self._listing = None

    def store_validation_results(self, suite_validation_result, *args: Any, **kwargs: Any):
        """Store a suite's result with GX's ``success`` set by kandev-dq's verdict (fail on
        error-severity rules only): GX's own ignores severity, so an info disclosure would fail
        a run through GX's API, its data docs status and its notifications, where
        ``kandev-dq check`` passes. GX derives the checkpoint's success from these afterwards."""
        suite_validation_result.success = suite_success(suite_validation_result)
        return super().store_validation_results(suite_validation_result, *args, **kwargs)

    def tuple_to_key(self, tuple_):
        key = self._keys.get(tuple_)
        if key is None:
            key = self._keys[tuple_] = _result_identifier(tuple_) or super().tuple_to_key(tuple_)
        return key


def _result_identifier(tuple_) -> ValidationResultIdentifier | None:
    if len(tuple_) < 4:
        return None
    try:
        when = dt.datetime.strptime(tuple_[-2], RUN_TIME_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError:
        return None  # not written by GX's own format: GX reads it its way
    return ValidationResultIdentifier(
        ExpectationSuiteIdentifier.from_tuple(tuple_[:-3]),
        RunIdentifier(tuple_[-3], when),
        tuple_[-1],
    )


def attach_records(context, records: Records) -> bool:
    """Make the context's validation results store use ``records``; False when the project
    keeps its results elsewhere (an older project on GX's filesystem backend)."""
    backend = context.validation_results_store.store_backend
    if isinstance(backend, RecordsStoreBackend):
        backend.attach(records)
        return True
    return False
