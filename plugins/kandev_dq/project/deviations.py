"""Where a project's suites and checkpoints differ from kandev-dq's rules: its deviations.

A project is data (docs/reliability.md, 3a), and its suites decide the verdict: a rule removed,
a severity lowered to ``info``, an argument widened or a suite emptied passes a store kandev-dq's
own suites would fail. Every run compares the checkpoint it runs, and the suites that checkpoint
runs, with what ``kandev-dq init`` writes (:mod:`kandev_dq.project.plan`), and names
each difference; ``--strict`` refuses a run with any (:func:`refuse_deviations`).

The project's JSON is read as the vetting reads it, without GX, from the folders kandev-dq's
projects keep it in. Suites are found by the name their JSON gives, never by a path a project
file names. Every name here comes from a project file: whoever shows a deviation escapes it
(:mod:`kandev_dq.text`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kandev_dq.contract.severity import Severity
from kandev_dq.contract.thresholds import ERROR_IF, WARN_IF, CountThresholds, ThresholdError
from kandev_dq.errors import KandevDqError
from kandev_dq.project.plan import CHECKPOINTS, SUITE_NAMES, Planned, suite_plan
from kandev_dq.project.vetting import CHECKPOINT_DIR, DEFINITION_DIR, SUITE_DIR
from kandev_dq.text import one_line

#: The kinds of deviation, each in a word (the JSON's ``kind``).
KINDS: dict[str, str] = {
    "removed": "a rule of kandev-dq's suite is not in the project's",
    "severity": "a rule runs at another severity than kandev-dq's",
    "arguments": "a rule is given other arguments than kandev-dq gives it",
    "thresholds": "a rule's count is judged by warn_if / error_if, where kandev-dq fails on any",
    "added": "the project's suite holds a rule kandev-dq's does not",
    "emptied": "the project's suite holds none of kandev-dq's rules",
    "suite_removed": "the checkpoint does not run a suite kandev-dq's runs",
    "suite_added": "the checkpoint runs a suite kandev-dq's does not",
}
#: Where a stored validation result carries its run's deviations (the data docs read them).
RESULT_META_KEY = "kandev_dq_project_deviations"
#: A project's value shown in a deviation is cut to this many characters.
SHOWN_CHARS = 200


@dataclass(frozen=True)
class Deviation:
    """One difference: the suite, the expectation (empty for a whole suite), its kind (a word
    of :data:`KINDS`) and what differs."""

    suite: str
    expectation: str
    kind: str
    detail: str

    @property
    def place(self) -> str:
        """``suite/expectation``, or the suite alone for a whole suite."""
        return f"{self.suite}/{self.expectation}" if self.expectation else self.suite

    def text(self) -> str:
        """``suite/expectation: kind: detail`` (unescaped: the caller escapes it)."""
        return f"{self.place}: {self.kind}: {self.detail}"

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, stored: object) -> Deviation | None:
        """A deviation as a stored result carries it (None: not one)."""
        if not isinstance(stored, dict):
            return None
        return cls(
            *(str(stored.get(name, "")) for name in ("suite", "expectation", "kind", "detail"))
        )


def project_deviations(project: Path, checkpoint: str) -> list[Deviation]:
    """What differs between ``checkpoint`` of ``project`` (which suites it runs, and what each
    holds) and kandev-dq's. A checkpoint kept elsewhere than as a file (a project's own store,
    under ``--allow-project-code``) is compared by its suites as kandev-dq's runs them."""
    files = ProjectFiles(Path(project))
    planned = CHECKPOINTS.get(checkpoint, ())
    runs = files.checkpoint_suites(checkpoint)
    found: list[Deviation] = []
    if runs is None:
        runs = list(planned)
    else:
        found += [
            Deviation(suite, "", "suite_removed", f"kandev-dq's {checkpoint} checkpoint runs it")
            for suite in planned
            if suite not in runs
        ]
        found += [
            Deviation(
                suite, "", "suite_added", f"kandev-dq's {checkpoint} checkpoint does not run it"
            )
            for suite in dict.fromkeys(runs)
            if suite not in planned
        ]
    for suite in dict.fromkeys(runs):
        found += _suite_deviations(suite, files.suite_expectations(suite))
    return found


def result_deviations(project: Path, checkpoint_id: str | None, suite: str) -> list[Deviation]:
    """The deviations of the run a stored result belongs to: its checkpoint's (found by the id
    GX gives the result), else, for a suite validated on its own, that suite's."""
    files = ProjectFiles(Path(project))
    checkpoint = files.checkpoint_named_by_id(checkpoint_id) if checkpoint_id else None
    if checkpoint is not None:
        return project_deviations(project, checkpoint)
    return _suite_deviations(suite, files.suite_expectations(suite))


def checkpoint_by_id(project: Path, checkpoint_id: str | None) -> tuple[str, list[str]] | None:
    """The name and the suites of the project's checkpoint with the id GX gives a result
    (None: no id, or no checkpoint of the project holds it)."""
    if not checkpoint_id:
        return None
    files = ProjectFiles(Path(project))
    name = files.checkpoint_named_by_id(checkpoint_id)
    suites = files.checkpoint_suites(name) if name is not None else None
    return (name, suites) if name is not None and suites is not None else None


def refuse_deviations(project: Path, checkpoint: str) -> None:
    """``--strict``: refuse a run whose project deviates from kandev-dq's rules, in one line
    naming each deviation by place and kind (before the store, the records database or GX is
    opened; a run without ``--strict`` says what differs)."""
    found = project_deviations(project, checkpoint)
    if found:
        named = ", ".join(f"{d.place} ({d.kind})" for d in found)
        raise KandevDqError(  # names from a project file: one line, escaped
            one_line(
                f"--strict: the project's {checkpoint} checkpoint deviates from kandev-dq's "
                f"rules in {len(found)} place(s): {named}; a run without --strict details them"
            )
        )


def deviations_pointer(deviations: list[Deviation]) -> str:
    """What a verdict line adds when the project deviates ("" when it does not)."""
    if not deviations:
        return ""
    return (
        f"; {len(deviations)} project deviation(s) from kandev-dq's rules "
        "(listed below; project_deviations in --format json)"
    )


def stored_deviations(metas: Iterable[object]) -> list[Deviation]:
    """The deviations stored results' ``meta`` carry, each once, in their order."""
    found: dict[Deviation, None] = {}
    for meta in metas:
        stored = meta.get(RESULT_META_KEY) if isinstance(meta, dict) else None
        for item in stored if isinstance(stored, list) else []:
            deviation = Deviation.from_json(item)
            if deviation is not None:
                found.setdefault(deviation)
    return list(found)


def _suite_deviations(suite: str, held: list[dict[str, Any]] | None) -> list[Deviation]:
    """What differs between the project's ``suite`` (its expectations; None: no such suite)
    and kandev-dq's suite of that name. A rule listed twice is paired with kandev-dq's once and
    its second copy is ``added``; the order of a suite's rules decides nothing."""
    if suite not in SUITE_NAMES:
        return []  # not kandev-dq's: the checkpoint's suite_added names it
    plan = suite_plan(suite)
    if not held:
        said = "no such suite in the project" if held is None else "the suite holds no rule"
        return [
            Deviation(suite, "", "emptied", f"{said}: none of kandev-dq's {len(plan)} rules run")
        ]
    unpaired = list(held)
    found: list[Deviation] = []
    for rule in plan:
        match = next((e for e in unpaired if e.get("type") == rule.type), None)
        if match is None:
            found.append(
                Deviation(
                    suite, rule.type, "removed", f"kandev-dq runs it at {_word(rule.severity)}"
                )
            )
            continue
        unpaired.remove(match)
        found += _rule_deviations(suite, rule, match)
    found += [
        Deviation(
            suite,
            _shown(e.get("type")),
            "added",
            f"not in kandev-dq's {suite} suite; the project runs it at {_word(e.get('severity'))}",
        )
        for e in unpaired
    ]
    return found


def _rule_deviations(suite: str, rule: Planned, held: dict[str, Any]) -> list[Deviation]:
    found = []
    if _word(held.get("severity")) != _word(rule.severity):
        found.append(
            Deviation(
                suite,
                rule.type,
                "severity",
                f"{_word(held.get('severity'))} in the project, {_word(rule.severity)} in "
                "kandev-dq's rules",
            )
        )
    meta = held.get("meta") if isinstance(held.get("meta"), dict) else {}
    if WARN_IF in meta or ERROR_IF in meta:
        try:
            given = CountThresholds.of(meta).text()
        except ThresholdError:
            given = _shown({key: meta[key] for key in (WARN_IF, ERROR_IF) if key in meta})
        found.append(
            Deviation(
                suite,
                rule.type,
                "thresholds",
                f"{given} in the project; kandev-dq's rules fail on any count",
            )
        )
    arguments = held.get("kwargs") or {}
    if arguments != rule.kwargs:
        found.append(
            Deviation(
                suite,
                rule.type,
                "arguments",
                f"{_shown(arguments)} in the project, {_shown(rule.kwargs)} in kandev-dq's rules",
            )
        )
    return found


@dataclass(frozen=True)
class ProjectEntry:
    """A rule as a project's suite runs it: the suite, the severity (kandev-dq's word), the
    arguments and the count thresholds it is given there."""

    suite: str
    severity: str
    arguments: dict[str, Any]
    thresholds: CountThresholds | None


def project_entry(project: Path, expectation: str) -> ProjectEntry | None:
    """The first of kandev-dq's suites in ``project`` that runs ``expectation``, as it runs it
    there; None when the project's suites do not run it."""
    files = ProjectFiles(project)
    for suite in SUITE_NAMES:
        for entry in files.suite_expectations(suite) or []:
            if entry.get("type") == expectation:
                arguments = entry.get("kwargs")
                meta = entry.get("meta")
                try:
                    thresholds = CountThresholds.of(meta if isinstance(meta, dict) else None)
                except ThresholdError as exc:
                    raise KandevDqError(
                        one_line(f"{expectation} in the project's suite {suite}: {exc}")
                    ) from None
                return ProjectEntry(
                    suite,
                    _word(entry.get("severity")),
                    arguments if isinstance(arguments, dict) else {},
                    thresholds,
                )
    return None


def _word(gx_severity: object) -> str:
    """kandev-dq's word for a suite's severity; a word it does not know, shown as given."""
    try:
        return Severity.from_gx(gx_severity if isinstance(gx_severity, str) else None).value
    except ValueError:
        return _shown(gx_severity)


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


class ProjectFiles:
    """A project's checkpoints, validation definitions and suites as JSON, each found by its
    file's name as GX's filesystem stores find them (never by a path a project file gives)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._read: dict[str, dict[str, dict[str, Any]]] = {}

    def checkpoint_suites(self, checkpoint: str) -> list[str] | None:
        """The suites ``checkpoint`` runs, in order (None: no such checkpoint file)."""
        document = self._documents(CHECKPOINT_DIR).get(checkpoint)
        if document is None:
            return None
        definitions = self._documents(DEFINITION_DIR)
        suites = []
        for reference in _list(document.get("validation_definitions")):
            name = reference.get("name") if isinstance(reference, dict) else None
            suite = (definitions.get(name) or {}).get("suite") if isinstance(name, str) else None
            named = suite.get("name") if isinstance(suite, dict) else None
            # A definition that cannot be read: the suite named like it (as init writes them).
            suites.append(_shown(named if named is not None else name))
        return suites

    def checkpoint_named_by_id(self, checkpoint_id: str) -> str | None:
        return next(
            (
                name
                for name, document in self._documents(CHECKPOINT_DIR).items()
                if document.get("id") == checkpoint_id
            ),
            None,
        )

    def suite_expectations(self, suite: str) -> list[dict[str, Any]] | None:
        """The expectations of the project's suite ``suite`` (None: there is no such suite)."""
        document = self._documents(SUITE_DIR).get(suite)
        if document is None:
            return None
        return [e for e in _list(document.get("expectations")) if isinstance(e, dict)]

    def _documents(self, folder: str) -> dict[str, dict[str, Any]]:
        if folder not in self._read:
            found = {}
            for path in sorted((self.root / folder).glob("*.json")):
                document = _json(path)
                if document is not None:
                    found[path.stem] = document
            self._read[folder] = found
        return self._read[folder]


def _json(path: Path) -> dict[str, Any] | None:
    """A project file's JSON object; None when there is none to read (the vetting, or GX when
    the user opted in to the project's code, reports a file that cannot be read)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _list(value: object) -> list:
    return value if isinstance(value, list) else []
