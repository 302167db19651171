"""What each ``kandev-dq check`` run saw, for the data docs: the run register.

The validation results carry neither the store a run read nor the raw key values. ``check``
reads both from the run's pinned snapshot before GX runs the checkpoint (the snapshot its rules
then judge) and records them here, without credentials, in ``uncommitted/run_register.json``
under the run's key. The data docs overview (:mod:`kandev_dq.report.site`) reads them back,
whenever its site is built; without a record it falls back on what the results say.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from kandev_dq.contract.states import state_of
from kandev_dq.facts.activation import describe_key
from kandev_dq.run.jsonfile import write_json_atomically
from kandev_dq.store.access import redact

logger = logging.getLogger(__name__)

REGISTER = Path("uncommitted") / "run_register.json"
REGISTER_LIMIT = 500


def run_key(run_id) -> str:
    """A run's name in the register: its run time as GX writes it in result paths."""
    return run_id.to_tuple()[1]


def record_run(
    root: Path,
    key: str,
    store: str,
    dialect: str,
    keys: dict[str, str | None],
    amended: bool | None = None,
) -> None:
    """Record a run: its store (as outputs name it, redacted once more for safety), dialect,
    AC-24c state, whether AC-33 clauses 1-3 held, and the activation keys. The newest
    :data:`REGISTER_LIMIT` runs are kept."""
    register = load_register(root)
    register[key] = {
        "store": redact(store),
        "dialect": dialect,
        "state": state_of(keys),
        "amended": amended,
        "keys": {name: _jsonable(describe_key(name, raw)) for name, raw in keys.items()},
    }
    if len(register) > REGISTER_LIMIT:
        register = dict(sorted(register.items())[-REGISTER_LIMIT:])
    write_json_atomically(Path(root) / REGISTER, register)


def load_register(root: Path | None) -> dict[str, dict[str, Any]]:
    if root is None:
        return {}
    path = Path(root) / REGISTER
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("unreadable %s: the overview falls back on the results", path)
        return {}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
