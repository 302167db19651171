"""GX's validation results, kept in the records database: a GX ``StoreBackend`` over SQLAlchemy.

GX 1.24 keeps validation results on the filesystem or in its cloud only. A project names this
backend for its ``ValidationResultsStore`` (``great_expectations.yml``, written by
``kandev-dq init``)::

    validation_results_store:
      module_name: kandev_dq.gx.results_store
      class_name: ValidationResultsStore
      store_backend:
        module_name: kandev_dq.gx.results_store
        class_name: RecordsStoreBackend

and GX's own machinery (checkpoints, data docs, ``get_validation_result``) reads and writes
results through it, one row per GX key in :data:`kandev_dq.records.results`. The database is
the project's records database (:func:`kandev_dq.records.records_url`); an optional ``url``
in the backend's config is the project's setting for it. The store itself is GX's class,
adapted where GX offers no public hook: :class:`kandev_dq.gx.adapter.ValidationResultsStore`,
which GX imports from here by the name the yml gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from great_expectations.data_context.store.store_backend import StoreBackend
from great_expectations.exceptions import InvalidKeyError

from kandev_dq.gx.adapter import ValidationResultsStore
from kandev_dq.project.vetting import vet_on_gx_path
from kandev_dq.records import Records, records_url

#: The store class a project's yml names here (``kandev-dq init`` writes this module's name):
#: GX's class, adapted where GX offers no public hook, lives with the other GX contact.
__all__ = ["RecordsStoreBackend", "ValidationResultsStore", "attach_records", "records_of"]


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
        vet_on_gx_path(root_directory)
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
        project's (:func:`~kandev_dq.records.records_url`), opened on first use."""
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


def attach_records(context, records: Records) -> bool:
    """Make the context's validation results store use ``records``; False when the project
    keeps its results elsewhere (an older project on GX's filesystem backend)."""
    backend = context.validation_results_store.store_backend
    if isinstance(backend, RecordsStoreBackend):
        backend.attach(records)
        return True
    return False


def records_of(context) -> Records | None:
    """The records database the context's results come from (None: an older project keeping
    its results in files, whose runs then show what their results say)."""
    backend = context.validation_results_store.store_backend
    return backend.records if isinstance(backend, RecordsStoreBackend) else None
