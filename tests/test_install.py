"""kandev-dq installed from its wheel, away from the repository, works on its own.

The wheel is built from a copy of the sources and installed into a fresh virtual
environment. The dependencies (GX, SQLAlchemy, ...) are taken from the running interpreter's
site-packages through a plain path entry, so nothing is downloaded and none of that
directory's ``.pth`` hooks run: an editable install of this checkout cannot leak in, and
every ``kandev_dq`` module must come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.gxhelpers import REPO


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "plugins",
        source / "plugins",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    dist = tmp_path / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(dist)],
        tmp_path,
        dict(os.environ),
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("kandev_dq-*.whl")
    return wheel


def _venv(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, dict(os.environ))
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp_path,
            dict(os.environ),
        ).stdout.strip()
    )
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "outer-dependencies.pth").write_text("\n".join(sorted(outer)) + "\n")
    installed = _run(
        [str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
        tmp_path,
        dict(os.environ),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def test_the_wheel_works_outside_the_repository(tmp_path):
    wheel = _build_wheel(tmp_path)
    venv = _venv(tmp_path, wheel)
    work = tmp_path / "work"
    work.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KANDEV_STORE_URL", "PYTHONPATH") and not k.startswith("KANDEV_DQ_")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    tool = str(venv / "bin" / "kandev-dq")

    where = _run(
        [str(venv / "bin" / "python"), "-c", "import kandev_dq.cli as c; print(c.__file__)"],
        work,
        env,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr

    helped = _run([tool, "--help"], work, env)
    assert helped.returncode == 0, helped.stderr
    for command in ("check", "audit", "history", "init", "sample", "migrate"):
        assert command in helped.stdout

    assert _run([tool, "init", "proj"], work, env).returncode == 0
    assert (work / "proj" / "great_expectations.yml").is_file()
    sampled = _run([tool, "sample", "--out", "s.db"], work, env)
    assert sampled.returncode == 0, sampled.stderr
    migrated = _run([tool, "migrate", "--store", "s.db"], work, env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    checked = _run(
        [tool, "check", "--store", "s.db", "--project", "proj", "--format", "json"], work, env
    )
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["state"] == "fully_activated" and report["success"] is True
    assert (work / "proj" / "uncommitted" / "data_docs" / "local_site" / "index.html").is_file()

    # No project in the current folder and no checkout around: a clear one-line error.
    lost = _run([tool, "check", "--store", "s.db"], work, env)
    assert lost.returncode == 2
    assert lost.stderr.startswith("kandev-dq: error: no GX project")
    assert "kandev-dq init" in lost.stderr and len(lost.stderr.splitlines()) == 1

    # The README's first command, twice in a row from the wheel; and what needs no project.
    for attempt in (1, 2):
        demo = _run([tool, "demo"], work, env)
        assert demo.returncode == 0, f"demo run {attempt}: {demo.stdout}{demo.stderr}"
    assert _run([tool, "rules"], work, env).returncode == 0
    version = _run([tool, "--version"], work, env)
    assert version.returncode == 0 and version.stdout.startswith("kandev-dq 0.")
