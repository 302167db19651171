"""Healthy scenarios: states that look wrong but are correct, and must raise no error."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.lab import upstream
from kandev_dq.lab.scenarios.baseline import (
    EXECUTION_1,
    EXECUTION_2,
    S1,
    S3,
    SL,
    T1,
    TC_COMPLETED,
    TC_LIVE_COMPLETED,
    TC_LIVE_RUNNING,
    TL,
    anchor,
    baseline,
    create,
    key_instant,
    legacy_store,
    next_free,
    run_migration,
    write_history,
    write_known_live,
    write_live_traffic,
)
from kandev_dq.lab.scenarios.mutations import add_after_live, add_messages, delete_messages, set_key
from kandev_dq.lab.scenarios.registry import NON_UTC_ZONE, non_utc_session, registered
from kandev_dq.lab.scenarios.rows import (
    MICROSECOND,
    MILLISECOND,
    SECOND,
    healthy_row,
    insert_rows,
    ordinary_message,
    session_row,
    subagent_message,
    tool_call,
    turn_row,
    uid,
    writing,
)


@registered("healthy_baseline", "The baseline itself: history, the real migration, live rows")
def _healthy_baseline(engine: sa.Engine) -> None:
    baseline(engine)


@registered(
    "upstream_shaped",
    "A store in upstream's own shapes (9-digit SQLite fractions, turn-end sweeps in the second "
    "of creation, 'null' metadata, nested subagents, a reused tool_call_id), activated as "
    "upstream's build does it, then migrated and written to by upstream's live writer",
)
def _upstream_shaped(engine: sa.Engine) -> None:
    upstream.build_upstream_store(engine, seed=0)
    run_migration(engine)  # the AC-33b self-heal: writes execution_since and nothing else
    upstream.append_upstream_live(engine, seed=0)


@registered("fresh_install", "A store created empty: the backfill matched nothing ('' sentinel)")
def _fresh_install(engine: sa.Engine) -> None:
    create(engine)
    run_migration(engine)
    start = next_free(engine)
    with writing(engine) as conn:
        insert_rows(conn, schema.task_sessions, [session_row(S1, T1, start)])
    write_known_live(engine, start + SECOND)
    write_live_traffic(engine)


@registered(
    "legacy_second_precision_keys",
    "Keys the pre-amendment build wrote at second precision, kept as they are",
    severity="info",
    discloses=("expect_legacy_keys_to_be_disclosed",),
)
def _legacy_keys(engine: sa.Engine) -> None:
    legacy_store(engine)
    run_migration(engine)  # rebuilds the table, writes execution_since; keeps both old keys
    write_known_live(engine)
    write_live_traffic(engine)


@registered(
    "legacy_partial_pair_repaired",
    "The old writer left backfill_through alone; the amended build wrote the missing key",
    severity="info",
    discloses=("expect_legacy_keys_to_be_disclosed",),
)
def _legacy_pair_repaired(engine: sa.Engine) -> None:
    legacy_store(engine)
    set_key(engine, CAPTURE_SINCE, None)  # the old writer's capture_since statement failed
    run_migration(engine)  # rebuild, execution_since, then the backfill repairs the pair
    write_known_live(engine)
    write_live_traffic(engine)


@registered(
    "live_rows_before_retried_capture",
    "The first backfill failed; live rows written before the retry precede capture_since",
)
def _retried_backfill(engine: sa.Engine) -> None:
    create(engine)
    write_history(engine)
    run_migration(engine, fail="backfill")  # execution_since only: no backfill key (AC-24a)
    # Microseconds apart so that all three precede the retry's capture_since.
    start = key_instant(engine, EXECUTION_SINCE).bound() + 100 * MICROSECOND
    write_known_live(engine, start, step=100 * MICROSECOND)
    run_migration(engine)  # the retry: backfill and both keys
    write_live_traffic(engine)


@registered(
    "real_uuid_before_execution_since",
    "The execution_since write failed once: rows with real execution ids precede the key",
)
def _self_healed(engine: sa.Engine) -> None:
    create(engine)
    write_history(engine)
    run_migration(engine, fail="execution_since")  # table amended, key and backfill not
    write_known_live(engine, datetime.now(UTC), step=100 * MICROSECOND)
    run_migration(engine)  # self-heal: execution_since, then the backfill
    write_live_traffic(engine)


@registered(
    "standing_excess",
    "A live row whose message write failed: excess since capture_since, attributed",
    severity="warning",
    discloses=("expect_no_writer_excess_since_capture_since",),
)
def _standing_excess(engine: sa.Engine) -> None:
    baseline(engine)
    delete_messages(engine, uid("m-live-completed"))


# fmt: off
@registered(
    "ac2_skipped_messages_after_capture",
    "Subagent messages without a tool_call_id or task id after capture_since: no row, no alarm",
)
def _ac2_skipped(engine: sa.Engine) -> None:
    baseline(engine)
    turn = uid("turn-live")
    add_after_live(
        engine,
        lambda at: subagent_message(
            uid("m-live-no-tool"), SL, TL, turn, at, None, tool_status="completed",
            status="completed", description="Frame without a tool call id",
        ),
        lambda at: subagent_message(
            uid("m-live-empty-tool"), SL, TL, turn, at, "", tool_status="pending",
            status="started", description="Frame with an empty tool call id",
        ),
        lambda at: subagent_message(
            uid("m-live-no-task"), SL, "", turn, at, tool_call("LiveNoTask"),
            tool_status="completed", status="completed", description="Frame without a task",
        ),
    )


@registered(
    "two_messages_one_subagent",
    "A later message updates a live subagent: two messages, one key, one row",
)
def _two_messages(engine: sa.Engine) -> None:
    baseline(engine)
    add_after_live(
        engine,
        lambda at: subagent_message(
            uid("m-live-running-update"), SL, TL, uid("turn-live"), at, TC_LIVE_RUNNING,
            tool_status="in_progress", subagent_type="explore",
            description="Search for flaky tests", status="running",
            child_session_id="ses_9Xc2Lm4Np6Qr8St0Uv2Wx4Yz6A", model="openai/gpt-5",
        ),
    )


@registered(
    "cross_execution_collision",
    "A later execution reuses a tool_call_id: two rows differing only in execution id",
    severity="info",
    discloses=("expect_no_cross_execution_collisions_since_capture_since",),
)
def _collision(engine: sa.Engine) -> None:
    baseline(engine)
    _reused_by_a_later_execution(
        engine, "m-live-reused", "turn-live-2", (SL, TL), TC_LIVE_COMPLETED,
        description="Summarise the failing tests again", agent_id="c0ffee03",
    )  # fmt: skip


@registered(
    "backfilled_tool_call_id_reused_after_activation",
    "After capture_since a later execution reuses a backfilled tool_call_id: a new message and "
    "a live row with its real execution id beside the backfill row (AC-22, AC-32)",
)
def _reused_backfilled(engine: sa.Engine) -> None:
    baseline(engine)
    _reused_by_a_later_execution(
        engine, "m-live-reuses-backfilled", "turn-reuse-backfilled", (S1, T1), TC_COMPLETED,
        description="Run the migration checks again", agent_id="c0ffee0a",
    )  # fmt: skip


def _reused_by_a_later_execution(
    engine: sa.Engine,
    message_name: str,
    turn_name: str,
    where: tuple[str, str],
    tool_call_id: str,
    *,
    description: str,
    agent_id: str,
) -> None:
    """A later execution's turn reusing ``tool_call_id``: its message, and the live row with
    its real execution id (AC-32: correct, never a duplicate)."""
    session, task = where
    at = next_free(engine)
    turn = uid(turn_name)
    # fmt: off
    message = subagent_message(
        uid(message_name), session, task, turn, at, tool_call_id,
        tool_status="completed", updated=at + 20 * SECOND, subagent_type="general-purpose",
        description=description, status="completed", agent_id=agent_id,
        model="claude-opus-4-1-20250805", total_tokens=9001, tool_use_count=2, duration_ms=19000,
    )
    # fmt: on
    with writing(engine) as conn:
        started = at - MILLISECOND
        insert_rows(conn, schema.task_session_turns, [turn_row(turn, session, task, started)])
        insert_rows(conn, schema.task_session_messages, [message])
        row = healthy_row(message, EXECUTION_2, at + 250 * MICROSECOND)
        insert_rows(conn, schema.subagents, [row])


@registered(
    "legacy_metadata_after_capture",
    "Messages whose metadata is '', 'null' or NULL after capture_since abort nothing",
)
def _legacy_metadata(engine: sa.Engine) -> None:
    baseline(engine)
    turn = uid("turn-live")
    add_after_live(
        engine,
        *(
            lambda at, n=n, raw=raw: ordinary_message(
                uid(f"m-live-meta-{n}"), SL, TL, turn, at, raw
            )
            for n, raw in enumerate(("", "null", None))
        ),
    )


@registered(
    "rows_exactly_at_keys",
    "A message and row exactly at capture_since, a row exactly at execution_since",
)
def _exactly_at_keys(engine: sa.Engine) -> None:
    # The newest backfilled message sits exactly at backfill_through in every baseline.
    def at_keys(engine: sa.Engine) -> None:
        turn = uid("turn-at-keys")
        made = []
        keys = ((EXECUTION_SINCE, "AtExecutionSince"), (CAPTURE_SINCE, "AtCaptureSince"))
        for key, label in keys:
            exact = key_instant(engine, key).bound()  # the first microsecond at the key
            message = subagent_message(
                uid(f"m-at-{key}"), S3, T1, turn, exact, tool_call(label),
                tool_status="in_progress", status="started", description=f"Launched at {key}",
                child_session_id="ses_" + label.ljust(26, "0"), model="openai/gpt-5",
            )
            made.append((message, healthy_row(message, EXECUTION_1, exact)))
        with writing(engine) as conn:
            insert_rows(conn, schema.task_session_turns, [turn_row(turn, S3, T1, anchor())])
            insert_rows(conn, schema.task_session_messages, [m for m, _ in made])
            insert_rows(conn, schema.subagents, [r for _, r in made])

    baseline(engine, after_migration=at_keys)


@registered(
    "message_just_after_backfill_through",
    "A message 1 µs after backfill_through and before capture_since, without a row",
)
def _just_after_through(engine: sa.Engine) -> None:
    def late_message(engine: sa.Engine) -> None:
        at = key_instant(engine, BACKFILL_THROUGH).micro + MICROSECOND
        add_messages(engine, subagent_message(
            uid("m-just-after"), S3, T1, uid("turn-4"), at, tool_call("JustAfterThrough"),
            tool_status="completed", status="completed", description="Committed after the MAX",
        ))

    baseline(engine, after_migration=late_message)
# fmt: on


@registered(
    "postgres_session_not_utc",
    f"The check's PostgreSQL session runs in {NON_UTC_ZONE} (SQLite: the baseline)",
    check_url=non_utc_session,
)
def _not_utc(engine: sa.Engine) -> None:
    baseline(engine)
