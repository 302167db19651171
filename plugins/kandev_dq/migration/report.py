"""What a migration run did, step by step: the step names, their outcomes and the report
(CONTRACT §3–§5, AC-20: a failing step is reported, never raised)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import ACTIVATION_KEYS
from kandev_dq.contract.states import FULLY_ACTIVATED, explain_state, state_of
from kandev_dq.errors import ExitCode
from kandev_dq.store.observe import SubagentsShape

STEP_META = "kandev_meta"
STEP_CREATE = "create_task_session_subagents"
STEP_AMEND = "amend_task_session_subagents"
STEP_EXECUTION_SINCE = "subagent_context_execution_since"
STEP_BACKFILL = "backfill_task_session_subagents"
STEP_LOCK = "migration_lock"
STEP_NAMES = (STEP_META, STEP_CREATE, STEP_AMEND, STEP_EXECUTION_SINCE, STEP_BACKFILL)
SHAPE_STEPS = (STEP_CREATE, STEP_AMEND)


class MigrationError(Exception):
    """A step found the store in a state it must not change (the reason is one line)."""


class Status(enum.StrEnum):
    DONE = "done"
    ALREADY_DONE = "already_done"
    SKIPPED = "skipped"
    FAILED = "failed"
    WOULD_RUN = "would_run"  #: dry run only
    WOULD_FAIL = "would_fail"  #: dry run only: a run would fail this step, for the reason given


@dataclass
class StepResult:
    name: str
    status: Status
    reason: str = ""
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": str(self.status),
            "reason": self.reason,
            **({"detail": self.detail} if self.detail else {}),
        }


@dataclass
class MigrationReport:
    """What a run did (or, with ``dry_run``, would do), step by step."""

    dialect: str
    dry_run: bool = False
    store: str = ""  #: the store as outputs name it (no credentials)
    steps: list[StepResult] = field(default_factory=list)
    shape: SubagentsShape | None = None  #: at the end of the run (dry run: as it is now)
    keys: dict[str, str | None] = field(default_factory=dict)  #: at the end (None = absent)
    qualifying_messages: int | None = None  #: dry run: messages matching AC-21's predicate
    backfill_rows: int | None = None  #: rows inserted (dry run: rows that would be inserted)

    @property
    def ok(self) -> bool:
        """True when no step failed (or, in a dry run, would fail)."""
        return all(step.status not in (Status.FAILED, Status.WOULD_FAIL) for step in self.steps)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.FAILED

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    def status(self, name: str) -> Status | None:
        found = self.step(name)
        return found.status if found else None

    def to_dict(self) -> dict:
        return {
            "store": self.store,
            "dialect": self.dialect,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "steps": [s.to_dict() for s in self.steps],
            "shape": self.shape.to_dict() if self.shape else None,
            "keys": dict(self.keys),
            "qualifying_messages": self.qualifying_messages,
            "backfill_rows": self.backfill_rows,
        }

    def render(self) -> str:
        """The report as plain text."""
        title = "migration plan (dry run, nothing written)" if self.dry_run else "migration"
        lines = [f"{title} — {self.dialect}"]
        if self.shape is not None:
            lines.append(f"  {schema.SUBAGENTS}: {self.shape.describe()}")
        for key in ACTIVATION_KEYS:
            value = self.keys.get(key)
            shown = "(absent)" if value is None else ("'' (sentinel)" if value == "" else value)
            lines.append(f"  {key} = {shown}")
        if self.dry_run and len(self.keys) == len(ACTIVATION_KEYS):
            state = state_of(self.keys)
            amended = self.shape.clauses_1_to_3_hold if self.shape is not None else None
            lines.append(f"  state: {state}")
            if state != FULLY_ACTIVATED:  # what the state means and what this run changes
                lines.append(f"    {explain_state(state, amended=amended)}")
        if self.qualifying_messages is not None:
            lines.append(f"  qualifying messages: {self.qualifying_messages}")
        if self.backfill_rows is not None:
            verb = "would insert" if self.dry_run else "inserted"
            lines.append(f"  backfill {verb}: {self.backfill_rows} row(s)")
        width = max((len(s.name) for s in self.steps), default=0)
        for s in self.steps:
            reason = f"  {s.reason}" if s.reason else ""
            lines.append(f"  {s.name:<{width}}  {s.status}{reason}")
        return "\n".join(lines)


@dataclass
class Outcome:
    status: Status
    reason: str = ""
    detail: dict = field(default_factory=dict)
