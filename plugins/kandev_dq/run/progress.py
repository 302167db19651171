"""Progress of a checkpoint run, on stderr: a rich bar on a terminal, plain lines elsewhere.

Reported per validation (one suite each): GX resolves the metrics of a whole suite in one
batch, so a finer step would not mean anything. Nothing is ever written to stdout, where
``--format json`` puts its single JSON object.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichBar

from kandev_dq.text import one_line


def _failures(failed: dict[str, int]) -> str:
    return f"{failed.get('error', 0)} error(s), {failed.get('warning', 0)} warning(s)"


class PlainProgress:
    """One line per suite, for logs, cron mail and pipes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.checkpoint = ""
        self.suites: dict[str, int] = {}
        self.done = 0

    def _say(self, line: str) -> None:
        self.stream.write(f"kandev-dq: {one_line(line)}\n")  # names come from the project
        self.stream.flush()

    def started(self, checkpoint: str, suites: list[tuple[str, int]]) -> None:
        self.checkpoint, self.suites, self.done = checkpoint, dict(suites), 0
        rules = sum(self.suites.values())
        self._say(f"{checkpoint}: {len(suites)} suite(s), {rules} rules")

    def suite_done(self, suite: str, failed: dict[str, int]) -> None:
        self.done += 1
        rules = self.suites.get(suite, 0)
        self._say(
            f"{self.checkpoint}: [{self.done}/{len(self.suites)}] {suite}: {rules} rules, "
            f"{_failures(failed)}"
        )

    def finished(self) -> None:
        pass


class RichProgress:
    """A live bar over the checkpoint's rules, advanced suite by suite; gone when done."""

    def __init__(self, console: Console) -> None:
        self.bar = RichBar(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rules"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.checkpoint = ""
        self.order: list[str] = []
        self.sizes: dict[str, int] = {}
        self.task = None

    def _describe(self, index: int) -> str:
        """The bar's label: rich markup, so the project's names in it are escaped."""
        if index >= len(self.order):
            return escape(one_line(f"{self.checkpoint}: building data docs"))
        return escape(
            one_line(f"{self.checkpoint}: {self.order[index]} ({index + 1}/{len(self.order)})")
        )

    def started(self, checkpoint: str, suites: list[tuple[str, int]]) -> None:
        self.checkpoint = checkpoint
        self.order = [name for name, _ in suites]
        self.sizes = dict(suites)
        self.bar.start()
        self.task = self.bar.add_task(self._describe(0), total=sum(self.sizes.values()))

    def suite_done(self, suite: str, failed: dict[str, int]) -> None:
        done = self.order.index(suite) + 1 if suite in self.order else len(self.order)
        self.bar.console.print(
            one_line(
                f"{self.checkpoint}: {suite}: {self.sizes.get(suite, 0)} rules, {_failures(failed)}"
            ),
            markup=False,
            highlight=False,
        )
        self.bar.update(
            self.task, advance=self.sizes.get(suite, 0), description=self._describe(done)
        )

    def finished(self) -> None:
        self.bar.stop()


def for_console(console: Console) -> PlainProgress | RichProgress:
    """The display that suits ``console`` (an stderr console): rich on a terminal, else lines."""
    return RichProgress(console) if console.is_terminal else PlainProgress(console.file)
