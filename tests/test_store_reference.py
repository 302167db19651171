"""A store is named once: its reference's display name, its name in the records, and the one
precedence of every setting."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kandev_dq.errors import StoreError
from kandev_dq.project.settings import chosen, store_option
from kandev_dq.store.reference import StoreRef, store_ref


@pytest.mark.parametrize(
    ("given", "shown", "spelled_name"),
    [
        ("{tmp}/k.db", "sqlite:///{tmp}/k.db", "sqlite:{tmp}/k.db"),
        ("sqlite:///{tmp}/k.db", "sqlite:///{tmp}/k.db", "sqlite:{tmp}/k.db"),
        ("postgresql://kandev:s3cret@db:5433/kandev", "postgresql://db:5433/kandev", None),
        ("postgres://db/kandev", "postgresql://db/kandev", None),
        ("host=db dbname=kandev password=s3cret", "postgresql://db/kandev", None),
        (
            "postgresql+psycopg://kandev@db/kandev?sslmode=require",
            "postgresql://db/kandev?sslmode=require",
            None,
        ),
    ],
)
def test_one_display_name_and_the_records_name_kept(given, shown, spelled_name, tmp_path):
    """Every output shows a store by one name; the records name it as they always have (a SQLite
    store as ``sqlite:/path``): ledger rows and run names recorded before still match."""
    ref = store_ref(given.format(tmp=tmp_path))
    assert ref.shown == shown.format(tmp=tmp_path)
    assert ref.spelled_name == (spelled_name or shown).format(tmp=tmp_path)
    assert "s3cret" not in repr(ref) and "s3cret" not in ref.shown


def test_a_reference_is_read_once_and_kept(tmp_path):
    ref = store_ref(str(tmp_path / "k.db"))
    assert store_ref(ref) is ref
    assert ref.kind == "sqlite" and ref.file == tmp_path / "k.db" and ref.is_path
    with pytest.raises(StoreError, match="unsupported database 'mysql'"):
        store_ref("mysql://u@db/kandev")


def test_a_path_or_a_plain_server_url_is_read_without_the_sql_toolkit(tmp_path):
    """The refusals of a missing file or an unreachable server come before SQLAlchemy loads:
    reading the reference does not load it."""
    probe = (
        "import sys\n"
        "from kandev_dq.store.reference import store_ref\n"
        f"for given in ({str(tmp_path / 'k.db')!r}, 'postgresql://u:p@127.0.0.1:9/k'):\n"
        "    ref = store_ref(given); ref.shown; ref.spelled_name\n"
        "print('sqlalchemy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_every_setting_takes_the_option_then_the_environment_then_the_project(monkeypatch):
    monkeypatch.setenv("KANDEV_DQ_TEST_SETTING", "from the environment")
    assert chosen("given", "KANDEV_DQ_TEST_SETTING", "project", "default") == "given"
    assert chosen(None, "KANDEV_DQ_TEST_SETTING", "project", "default") == "from the environment"
    monkeypatch.setenv("KANDEV_DQ_TEST_SETTING", "")  # empty is unset
    assert chosen("", "KANDEV_DQ_TEST_SETTING", "project", "default") == "project"
    assert chosen(None, "KANDEV_DQ_TEST_SETTING", None, "default") == "default"
    assert chosen(None, "KANDEV_DQ_TEST_SETTING") is None


def test_the_store_option_falls_back_to_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no default store there
    monkeypatch.setenv("KANDEV_STORE_URL", "postgresql://db/kandev")
    assert store_option(None) == "postgresql://db/kandev"
    assert store_option("k.db") == "k.db"
    monkeypatch.delenv("KANDEV_STORE_URL")
    with pytest.raises(StoreError, match="no store given"):
        store_option(None)


def test_two_spellings_of_one_sqlite_file_are_one_database(tmp_path):
    file = tmp_path / "k.db"
    file.write_bytes(b"")
    (tmp_path / "link.db").hardlink_to(file)
    ref = store_ref(str(file))
    assert isinstance(ref, StoreRef)
    assert ref.same_database(store_ref(f"sqlite:///{file}"))
    assert ref.same_database(store_ref(str(tmp_path / "link.db")))  # by inode
    assert not ref.same_database(store_ref(str(tmp_path / "other.db")))


def test_a_check_reads_its_store_and_its_records_once(target, project, monkeypatch):
    """``kandev_dq.check`` reads ``--store`` and the records database once each, at its edge,
    and every step after works on those references (on both dialects)."""
    import kandev_dq
    from kandev_dq.lab.storebuilder import StoreBuilder
    from kandev_dq.project import settings
    from kandev_dq.store import reference

    StoreBuilder(target.engine).create()
    read: list[str] = []
    resolve = reference.resolve_url
    monkeypatch.setattr(reference, "resolve_url", lambda text: read.append(text) or resolve(text))
    options: list[str | None] = []
    option = settings.store_option
    monkeypatch.setattr(settings, "store_option", lambda text: options.append(text) or option(text))
    report = kandev_dq.check(store=target.url, checkpoint="nightly", project=project)
    assert report.results and options == [target.url]
    assert len(read) == len(set(read)), read  # no text is read into a URL twice
