"""The README's two set-up commands, exactly as it prints them.

The first runs, twice, in a clean copy of the checkout on the system's own externally managed
``python3`` (PEP 668), with nothing else on ``PATH``: what a new user on a stock Debian or
Ubuntu gets. CI runs the second.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.gxhelpers import REPO

SYSTEM_PYTHON = Path("/usr/bin/python3")
SYSTEM_PATH = "/usr/bin:/bin"


def readme_commands() -> tuple[str, str]:
    """The demo command and the test command: the two lines of the README's first bash block."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    demo, tests = block.strip().splitlines()
    return demo, tests


def _system_python(probe: str) -> bool:
    done = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", probe], capture_output=True, env={"PATH": SYSTEM_PATH}
    )
    return done.returncode == 0


def _require_stock_python() -> None:
    externally_managed = (
        "import os, sysconfig, sys; "
        "sys.exit(not os.path.isfile(os.path.join(sysconfig.get_path('stdlib'), "
        "'EXTERNALLY-MANAGED')))"
    )
    if not SYSTEM_PYTHON.is_file() or not _system_python(externally_managed):
        pytest.skip(f"no externally managed python3 (PEP 668) at {SYSTEM_PYTHON}")
    # Debian ships venv's pip bootstrap apart, in python3-venv; .ci/run installs it.
    if not _system_python("import ensurepip"):
        reason = f"{SYSTEM_PYTHON} -m venv needs the python3-venv package (apt-get install it)"
        if IN_CI:
            pytest.fail(f"{reason}, which CI=true requires", pytrace=False)
        pytest.skip(reason)


def _clean_copy(destination: Path) -> Path:
    """What a fresh clone holds: the files git tracks, and new ones it does not ignore, as they
    are in the working tree (so uncommitted edits are tested too); nothing ignored, no .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name, follow_symlinks=False)
    return destination


@pytest.mark.slow
def test_the_readme_demo_command_runs_as_printed_on_the_system_python(tmp_path):
    _require_stock_python()
    demo, _ = readme_commands()
    clone = _clean_copy(tmp_path.resolve() / "kandev-dq")
    # Only the system's PATH; pip keeps its settings (index, certificates) and its cache.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KANDEV_STORE_URL")
        and not k.startswith("KANDEV_DQ_")
    }
    env["PATH"] = SYSTEM_PATH
    docs = clone / "kandev-demo" / "project" / "uncommitted" / "data_docs" / "local_site"
    for attempt in ("first", "second, reusing the environment"):
        done = subprocess.run(
            ["/bin/bash", "-c", demo],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, f"{attempt} run: {done.stdout}\n{done.stderr}"
        assert f"data docs: {docs / 'index.html'}\n" in done.stdout, done.stdout
        assert (docs / "index.html").is_file()
    config = (clone / ".venv" / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "home = /usr/bin\n" in config, config  # the environment is the system python's


def test_ci_runs_the_readme_test_command_as_printed():
    _, tests = readme_commands()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()


def test_the_readme_environment_is_ignored_by_git():
    ignored = subprocess.run(["git", "check-ignore", "-q", ".venv/bin/python"], cwd=REPO)
    assert ignored.returncode == 0
