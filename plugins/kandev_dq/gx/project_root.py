"""A kandev-dq project loaded with GX's ``project_root_dir``: stopped with the call that works.

``gx.get_context(mode="file", project_root_dir=P)`` loads the context in ``P/gx/``, and writes
an empty project there when it finds none. A kandev-dq project is ``P`` itself (its yml at the
root, where the README's commands read it), so ``init`` writes ``P/gx/great_expectations.yml``
naming :class:`ExpectationsStore`: GX builds it first and the load stops there, naming
``context_root_dir``, before GX writes anything (``tests/test_gx_native.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kandev_dq.errors import KandevDqError


class ExpectationsStore:
    """Named as GX's own expectations store, which GX would otherwise add in its place."""

    def __init__(self, root_directory: str | None = None, **_: Any) -> None:
        here = Path(root_directory or "gx")
        raise KandevDqError(
            f"{here.parent} is a kandev-dq project: load it with "
            f"gx.get_context(mode='file', context_root_dir={str(here.parent)!r}); "
            f"project_root_dir reads its {here.name}/ folder, which holds only this message"
        )
