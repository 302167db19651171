"""The GX project: which expectations form which suite, which suites each checkpoint runs, and
loading a project safely.

The repository root is a GX file context (``great_expectations.yml`` at the root). Its suites,
validation definitions and checkpoints are generated from :data:`SUITES` and
:data:`CHECKPOINTS` by :func:`build_project` (also what ``kandev-dq init`` runs), so the JSON
in ``expectations/`` and ``checkpoints/`` never drifts from the code. The store is chosen at run
time: the one data source reads its URL from ``${KANDEV_STORE_URL}``, a config variable given
through GX's runtime environment (never the process environment) and always password-free; the
connections themselves come from kandev-dq (:mod:`kandev_dq.run.gx_adapter`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from kandev_dq.errors import KandevDqError

PROJECT_FILE = "great_expectations.yml"
#: The GX config variable the data source's URL comes from. Users name a store with the same
#: environment variable; GX's runtime environment, where kandev-dq puts the URL, ranks above it.
URL_VARIABLE = "KANDEV_STORE_URL"
DATASOURCE = "kandev_store"
ASSET = "kandev_meta"
BATCH = "whole_table"
SUITE_DIR = "expectations"
CHECKPOINT_DIR = "checkpoints"
DEFINITION_DIR = "validation_definitions"
#: Modules a project's config may name by default: kandev-dq's own and GX's own.
TRUSTED_MODULE = re.compile(r"(great_expectations|kandev_dq)(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _activation_suite() -> list:
    from kandev_dq.expectations import activation as a

    return [
        a.ExpectActivationKeysToBeWellFormed.at_default_severity(),
        a.ExpectActivationKeysToBePaired.at_default_severity(),
        a.ExpectActivationStateToBeInSet.at_default_severity(accepted_states=["fully_activated"]),
        a.ExpectExecutionSinceOnlyOnAmendedSchema.at_default_severity(),
        a.ExpectExecutionSinceNotPendingSelfHeal.at_default_severity(),
        a.ExpectActivationKeysToBeWriteOnce.at_default_severity(
            first_seen={"$PARAMETER": a.KEY_LEDGER}
        ),
        a.ExpectWriteOnceBaselineToPredateThisRun.at_default_severity(
            baseline={"$PARAMETER": a.WRITE_ONCE_BASELINE}
        ),
        a.ExpectBackfillThroughNotAfterCaptureSince.at_default_severity(),
        a.ExpectBackfillThroughToCoverQualifyingMessages.at_default_severity(),
        a.ExpectNoBackfillRowsAfterCaptureSince.at_default_severity(),
        a.ExpectNoBackfillRowsAfterBackfillThrough.at_default_severity(),
        a.ExpectNoBackfillRowsUnderSentinel.at_default_severity(),
        a.ExpectNoBackfillRowsInsideSentinelWindow.at_default_severity(),
        a.ExpectNewKeysToCarrySubsecondPrecision.at_default_severity(),
        a.ExpectLegacyKeysToBeDisclosed.at_default_severity(),
        a.ExpectPopulationToBeDisclosed.at_default_severity(),
    ]


def _writer_health_suite() -> list:
    from kandev_dq.expectations import health as h
    from kandev_dq.expectations import stored_text as t

    return [
        h.ExpectNoWriterShortfallSinceCaptureSince.at_default_severity(),
        h.ExpectWriterToHaveWrittenSinceCaptureSince.at_default_severity(),
        h.ExpectSubagentActivitySinceCaptureSince.at_default_severity(),
        h.ExpectNoWriterExcessSinceCaptureSince.at_default_severity(),
        h.ExpectNoCrossExecutionCollisionsSinceCaptureSince.at_default_severity(),
        t.ExpectMessageMetadataToBeJson.at_default_severity(),
        t.ExpectMessageMetadataMemberNamesToBeUnique.at_default_severity(),
    ]


def _rows_suite() -> list:
    from kandev_dq.expectations import rows as r
    from kandev_dq.expectations import stored_text as t

    return [
        r.ExpectSubagentRowsToHaveIdentity.at_default_severity(),
        r.ExpectSubagentKeyToBeUnique.at_default_severity(),
        r.ExpectAgentExecutionIdToBePresent.at_default_severity(),
        r.ExpectAgentExecutionIdToBeUuidOrUnknown.at_default_severity(),
        r.ExpectSubagentSourceToBeLiveOrBackfill.at_default_severity(),
        r.ExpectBackfillRowsToCarryUnknownExecution.at_default_severity(),
        r.ExpectNoEmptyStringsInNullableText.at_default_severity(),
        r.ExpectNoNegativeMetrics.at_default_severity(),
        r.ExpectNoZeroTokensOrDuration.at_default_severity(),
        r.ExpectAsyncLaunchedRowsToHaveNoMetrics.at_default_severity(),
        r.ExpectSettledAtIffTerminalToolStatus.at_default_severity(),
        r.ExpectToolStatusInAcpVocabulary.at_default_severity(),
        r.ExpectObservedAtNotAfterUpdatedOrSettled.at_default_severity(),
        r.ExpectNoOrphanSubagentRows.at_default_severity(),
        r.ExpectIsAsyncToBeZeroOrOne.at_default_severity(),
        r.ExpectSubagentRowsWhenQualifyingMessagesExist.at_default_severity(),
        r.ExpectCompletedRowsToReportMetrics.at_default_severity(),
        t.ExpectTimestampsInRecognisedUtcForm.at_default_severity(),
        t.ExpectTimestampsToBeWithinRange.at_default_severity(),
    ]


def _schema_suite() -> list:
    from kandev_dq.expectations import schema as s

    return [
        s.ExpectSubagentsTableToExist.at_default_severity(),
        s.ExpectExecutionColumnToBeNotNull.at_default_severity(),
        s.ExpectThreeColumnUniqueKey.at_default_severity(),
        s.ExpectNoTwoColumnUniqueKey.at_default_severity(),
        s.ExpectSecondaryIndexesAsFreshStore.at_default_severity(),
        s.ExpectNoPartialSubagentsUpgrade.at_default_severity(),
        s.ExpectSessionForeignKeyToCascade.at_default_severity(),
        s.ExpectNoForeignKeyOnTurnOrExecution.at_default_severity(),
    ]


def _backfill_suite() -> list:
    from kandev_dq.expectations import backfill as b

    return [
        b.ExpectBackfillReconciliationNotVacuous.at_default_severity(),
        b.ExpectBackfillIdentityToMatchMessage.at_default_severity(),
        b.ExpectBackfillTurnIdToMatchMessage.at_default_severity(),
        b.ExpectBackfillStatusesToMatchMessage.at_default_severity(),
        b.ExpectBackfillMetricsToMatchMessage.at_default_severity(),
        b.ExpectBackfillTextToMatchMessage.at_default_severity(),
        b.ExpectBackfillObservedAtToBeMessageCreatedAt.at_default_severity(),
        b.ExpectBackfillSettledAtToFollowToolStatus.at_default_severity(),
        b.ExpectBackfillRowsFromWinningMessage.at_default_severity(),
        b.ExpectNoBackfillRowsWithoutQualifyingMessage.at_default_severity(),
        b.ExpectNoBackfillRowsRelabelledLive.at_default_severity(),
    ]


#: Suite name -> a function building its expectations (imported lazily: GX is slow to import).
SUITES: dict[str, Callable[[], list]] = {
    "activation": _activation_suite,
    "writer_health": _writer_health_suite,
    "rows": _rows_suite,
    "schema": _schema_suite,
    "backfill": _backfill_suite,
}

#: Checkpoint name -> the suites it runs, in order.
CHECKPOINTS: dict[str, tuple[str, ...]] = {
    "nightly": ("activation", "writer_health", "rows"),
    "pre_release": ("activation", "writer_health", "rows", "schema", "backfill"),
    "post_migration": ("schema", "activation", "backfill"),
}


def default_project() -> Path:
    """The current directory when it is a project, else the source checkout kandev-dq runs from.

    An installed wheel carries no project (GX keeps results, docs and the key ledger beside
    the project, never inside site-packages): there is none until ``kandev-dq init DIR``.
    """
    here = Path.cwd()
    if (here / PROJECT_FILE).is_file():
        return here
    checkout = Path(__file__).resolve().parents[3]  # <checkout>/plugins/kandev_dq/run
    if (checkout / PROJECT_FILE).is_file() and (checkout / "pyproject.toml").is_file():
        return checkout
    raise KandevDqError(
        f"no GX project: {here} has no {PROJECT_FILE}; pass --project DIR, "
        "or create one with `kandev-dq init DIR`"
    )


def refuse_project_code(root: Path) -> None:
    """Refuse a project whose config would make GX import code that is not kandev-dq's or GX's.

    A project is data: checkouts written by others are checked with it. GX imports whatever
    ``module_name`` the yml names (stores, store backends, data docs sites, their builders,
    renderers and views) and the checkpoints name (action renderers), and puts the yml's
    ``plugins_directory`` on ``sys.path``. This reads those files before GX does and imports
    nothing.
    """
    from ruamel.yaml import YAML, YAMLError

    yml = root / PROJECT_FILE
    try:
        config = YAML(typ="safe").load(yml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        raise KandevDqError(f"cannot read {yml}: {type(exc).__name__}") from None
    _refuse_foreign_modules(yml, config)
    config = config if isinstance(config, dict) else {}
    for checkpoint in sorted(_checkpoint_folder(yml, config).rglob("*.json")):
        try:
            document = json.loads(checkpoint.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise KandevDqError(f"cannot read {checkpoint}: {type(exc).__name__}") from None
        _refuse_foreign_modules(checkpoint, document)
    plugins = config.get("plugins_directory")  # GX appends it to sys.path
    own = Path(__file__).resolve().parents[2]  # the folder kandev_dq itself is imported from
    if plugins is not None and (root / str(plugins)).resolve() != own:
        raise KandevDqError(
            f"{yml}: plugins_directory {plugins!r} is project code, not kandev-dq's; "
            "pass --allow-project-code to run it"
        )


def _checkpoint_folder(yml: Path, config: dict) -> Path:
    """Where the checkpoint store keeps its JSON; only a local folder can be read beforehand."""
    name = config.get("checkpoint_store_name", "checkpoint_store")
    backend = ((config.get("stores") or {}).get(name) or {}).get("store_backend") or {}
    if backend.get("class_name", "TupleFilesystemStoreBackend") != "TupleFilesystemStoreBackend":
        raise KandevDqError(
            f"{yml}: stores.{name} keeps checkpoints in a {backend['class_name']}, where they "
            "cannot be vetted; pass --allow-project-code to use it"
        )
    folder = (yml.parent / backend.get("base_directory", CHECKPOINT_DIR)).resolve()
    if not folder.is_relative_to(yml.parent.resolve()):
        raise KandevDqError(
            f"{yml}: stores.{name} keeps checkpoints outside the project folder ({folder}); "
            "pass --allow-project-code to use it"
        )
    return folder


def _refuse_foreign_modules(file: Path, node: object, where: str = "") -> None:
    if isinstance(node, dict):
        module = node.get("module_name")
        if module is not None and not (
            isinstance(module, str) and TRUSTED_MODULE.fullmatch(module)
        ):
            entry = f"{where or '(top)'}: module_name {module!r}"
            raise KandevDqError(
                f"{file}: {entry} is project code, not kandev-dq's or GX's; "
                "pass --allow-project-code to run it"
            )
        for key, value in node.items():
            _refuse_foreign_modules(file, value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _refuse_foreign_modules(file, value, f"{where}[{index}]")


def load_context(root: Path, store_url: str | None = None, *, allow_project_code: bool = False):
    """A file context rooted at ``root``, with every kandev-dq expectation registered first.

    ``store_url`` (password-free) is what the data source's ``${KANDEV_STORE_URL}`` resolves
    to: GX's runtime environment ranks above the process environment and the project's config
    variables. (The records database is never a config variable: its URL may hold a password;
    kandev-dq attaches it to the results store, :func:`kandev_dq.run.results_store.attach_records`.)

    Refuses a folder without ``great_expectations.yml`` (GX would silently create an empty
    project there), a project that names Python of its own unless the user opted in with
    ``allow_project_code`` (:func:`refuse_project_code`), and a suite that loads fewer
    expectations than its JSON holds (GX drops unknown expectation types and the checkpoint
    would then pass on bad data).
    """
    root = Path(root)
    if not (root / PROJECT_FILE).is_file():
        raise KandevDqError(f"{root} is not a kandev-dq project: no {PROJECT_FILE} there")
    if not allow_project_code:
        refuse_project_code(root)
    import kandev_dq.expectations  # noqa: F401 - registers the types before any suite loads

    quiet_gx()
    import great_expectations as gx

    context = _file_context(gx, root, store_url)
    for path in sorted((root / SUITE_DIR).glob("*.json")):
        declared = len(json.loads(path.read_text(encoding="utf-8")).get("expectations", []))
        loaded = len(context.suites.get(path.stem).expectations)
        if loaded != declared:
            raise KandevDqError(
                f"suite {path.stem} loaded {loaded} of its {declared} expectations: "
                "an expectation type is unknown to this kandev-dq version"
            )
    return context


def _file_context(gx, root: Path, store_url: str | None):
    variables = {URL_VARIABLE: store_url} if store_url else None
    return gx.get_context(mode="file", context_root_dir=str(root), runtime_environment=variables)


def quiet_gx() -> None:
    """No GX progress bars or INFO chatter on non-interactive output."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)


_YML = """\
# kandev-dq: a Great Expectations file context. Suites, validation definitions and checkpoints
# are generated by `kandev-dq init`; the store is chosen at run time through ${KANDEV_STORE_URL}.
config_version: 4.0
analytics_enabled: false
progress_bars:
  globally: false
  metric_calculations: false
stores:
  expectations_store:
    class_name: ExpectationsStore
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: expectations/
  validation_results_store:
    # Results live in the records database (with the key ledger and the run register):
    # --records URL, else $KANDEV_DQ_RECORDS_URL, else a `url:` set here, else
    # uncommitted/records.db. Keep passwords out of this file: use the variable.
    module_name: kandev_dq.run.results_store
    class_name: ValidationResultsStore
    store_backend:
      module_name: kandev_dq.run.results_store
      class_name: RecordsStoreBackend
  checkpoint_store:
    class_name: CheckpointStore
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: checkpoints/
      suppress_store_backend_id: true
  validation_definition_store:
    class_name: ValidationDefinitionStore
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: validation_definitions/
expectations_store_name: expectations_store
validation_results_store_name: validation_results_store
checkpoint_store_name: checkpoint_store
data_docs_sites:
  # kandev-dq's site builder: every CSS/JS/font asset served from the site's static/ folder
  # (readable offline), plus the store overview page linked from the top of index.html.
  local_site:
    module_name: kandev_dq.report.site
    class_name: KandevSiteBuilder
    show_how_to_buttons: false
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: uncommitted/data_docs/local_site/
    site_index_builder:
      class_name: DefaultSiteIndexBuilder
      renderer:
        module_name: kandev_dq.report.site
        class_name: KandevSiteIndexPageRenderer
      view:
        module_name: kandev_dq.report.site
        class_name: KandevIndexPageView
    site_section_builders:
      expectations:
        view:
          module_name: kandev_dq.report.site
          class_name: KandevPageView
      validations:
        view:
          module_name: kandev_dq.report.site
          class_name: KandevPageView
      profiling:
        view:
          module_name: kandev_dq.report.site
          class_name: KandevPageView
"""


def generated_files(root: Path) -> list[Path]:
    """Every file :func:`build_project` writes into ``root`` (GX's store folders aside)."""
    root = Path(root)
    return [
        root / PROJECT_FILE,
        *(
            root / folder / f"{name}.json"
            for name in SUITES
            for folder in (SUITE_DIR, DEFINITION_DIR)
        ),
        *(root / CHECKPOINT_DIR / f"{name}.json" for name in CHECKPOINTS),
    ]


def build_project(root: Path) -> Path:
    """Write a complete project (yml, suites, validation definitions, checkpoints) into root.

    Only kandev-dq's own files are written, and only they are replaced: a user's suites and
    checkpoints of other names beside them stay untouched.
    """
    import great_expectations as gx
    import sqlalchemy as sa
    from great_expectations.checkpoint import UpdateDataDocsAction

    import kandev_dq.expectations  # noqa: F401
    from kandev_dq.contract import tables as schema

    quiet_gx()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for own in generated_files(root)[1:]:  # GX adds by name: an earlier copy would clash
        own.unlink(missing_ok=True)
    (root / PROJECT_FILE).write_text(_YML, encoding="utf-8")
    with tempfile.TemporaryDirectory() as scratch:
        # GX tests the connection while a data source is added: give it a blank Kandev store.
        probe = Path(scratch) / "probe.db"
        engine = sa.create_engine(f"sqlite:///{probe}")
        with engine.begin() as conn:
            schema.create_base_tables(conn)
        engine.dispose()
        context = _file_context(gx, root, f"sqlite:///{probe}")
        source = context.data_sources.add_sql(
            DATASOURCE, connection_string="${" + URL_VARIABLE + "}"
        )
        batch = source.add_table_asset(ASSET, table_name=ASSET).add_batch_definition_whole_table(
            BATCH
        )
        definitions = {}
        for name, build in SUITES.items():
            suite = context.suites.add(gx.ExpectationSuite(name=name))
            for expectation in build():
                suite.add_expectation(expectation)
            suite.save()
            definitions[name] = context.validation_definitions.add(
                gx.ValidationDefinition(name=name, data=batch, suite=suite)
            )
        for name, suites in CHECKPOINTS.items():
            context.checkpoints.add(
                gx.Checkpoint(
                    name=name,
                    validation_definitions=[definitions[s] for s in suites],
                    actions=[UpdateDataDocsAction(name="update_data_docs")],
                    result_format={"result_format": "COMPLETE"},
                )
            )
    return root
