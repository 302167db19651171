"""Part of a checkpoint: the suites and rules ``check --suite`` / ``--rule`` run (a partial run).

A partial run is named apart from its checkpoint's whole runs
(:func:`kandev_dq.records.register.run_name`) and the run register records what it ran, so
``history``, the metrics and JUnit never take it for a whole run; each of its rules is compared
with the last run that judged that rule, and a rule it did not run is left as it was
(:func:`kandev_dq.records.changes.previous_state`). The names are read from the project's
files, as the deviations read them, before GX or the store is opened: a name the checkpoint
does not run is a one-line refusal with the closest name.

A ``live`` suite runs whole: its window and the findings it leaves open belong to the whole
suite (:mod:`kandev_dq.records.watermark`), and a run of some of its rules would move the
suite's watermark past changes the others never read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kandev_dq.contract.rule_index import LIVE_SUITES
from kandev_dq.errors import KandevDqError, did_you_mean
from kandev_dq.project.deviations import ProjectFiles
from kandev_dq.text import file_name_slug

#: A part's name in a run name, at most this long (longer ones are cut and get a digest).
NAME_CHARS = 60


@dataclass(frozen=True)
class Selection:
    """The suites (empty: every suite holding a chosen rule) and rules (empty: every rule of
    the chosen suites) a partial run of ``checkpoint`` runs, in the order given."""

    checkpoint: str
    suites: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()

    def takes_suite(self, suite: str, expectations: list[str]) -> bool:
        """Whether the run validates ``suite`` (holding ``expectations``)."""
        if self.suites and suite not in self.suites:
            return False
        return not self.rules or any(rule in self.rules for rule in expectations)

    @property
    def name(self) -> str:
        """The part in a run's name: one name as it is (``suite.rows``, ``rule.<expectation>``),
        several (or one too long) cut and followed by a digest of them all; file-name safe, one
        name per part whatever order its names were given in."""
        parts = [*(f"suite.{s}" for s in sorted(set(self.suites)))]
        parts += [f"rule.{r}" for r in sorted(set(self.rules))]
        named = file_name_slug("+".join(parts))
        if len(named) <= NAME_CHARS and len(parts) == 1:
            return named
        digest = hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:8]
        return f"{named[: NAME_CHARS - 9].rstrip('-.+')}-{digest}"

    def to_json(self) -> dict[str, list[str]]:
        return {"suites": list(self.suites), "rules": list(self.rules)}

    @classmethod
    def from_json(cls, checkpoint: str, document: object) -> Selection:
        """A selection as the run register keeps it (a records database may come from
        elsewhere: anything but lists of names reads as none)."""
        held = document if isinstance(document, dict) else {}

        def names(key: str) -> tuple[str, ...]:
            value = held.get(key)
            return tuple(str(n) for n in value) if isinstance(value, list) else ()

        return cls(checkpoint, names("suites"), names("rules"))

    def text(self) -> str:
        """What the run ran, in words (names from the project: the caller escapes them)."""
        said = []
        if self.suites:
            said.append(f"suite {', '.join(self.suites)}")
        if self.rules:
            said.append(f"rule {', '.join(self.rules)}")
        return "partial run: " + "; ".join(said)


def chosen_selection(
    project: Path, checkpoint: str, suites: list[str] | None, rules: list[str] | None
) -> Selection | None:
    """The part of ``checkpoint`` named by ``suites`` and ``rules`` (None: neither given, the
    whole checkpoint), each name checked against the project's files; a name the checkpoint
    does not run, a rule none of the chosen suites holds, or part of a live suite is refused."""
    if not suites and not rules:
        return None
    suites, rules = list(dict.fromkeys(suites or ())), list(dict.fromkeys(rules or ()))
    files = ProjectFiles(Path(project))
    runs = files.checkpoint_suites(checkpoint)
    if runs is None:
        raise KandevDqError(
            f"--suite/--rule: the checkpoint {checkpoint!r} is not kept as a file in {project}, "
            "so its suites cannot be read before it runs"
        )
    for suite in suites:
        if suite not in runs:
            raise KandevDqError(
                f"--suite {suite!r}: checkpoint {checkpoint} runs no such suite "
                f"(its suites: {', '.join(dict.fromkeys(runs))})" + did_you_mean(suite, runs)
            )
    held = {suite: _types(files, suite) for suite in dict.fromkeys(suites or runs)}
    for rule in rules:
        if not any(rule in types for types in held.values()):
            where = f"suite {', '.join(suites)}" if suites else f"checkpoint {checkpoint}"
            known = [t for types in held.values() for t in types]
            raise KandevDqError(
                f"--rule {rule!r}: {where} runs no such rule" + did_you_mean(rule, known)
            )
    selection = Selection(checkpoint, tuple(suites), tuple(rules))
    for suite, types in held.items():
        if suite in LIVE_SUITES and rules and selection.takes_suite(suite, types):
            left = [t for t in types if t not in rules]
            if left:
                raise KandevDqError(
                    f"--rule: the live suite {suite} runs whole (its window and open findings "
                    f"are the whole suite's): run it with --suite {suite}, without --rule"
                )
    return selection


def _types(files: ProjectFiles, suite: str) -> list[str]:
    return [str(e.get("type")) for e in files.suite_expectations(suite) or []]
