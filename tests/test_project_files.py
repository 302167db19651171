"""The committed GX project is exactly what the code builds (no drift between JSON and code)."""

import json

from tests.gxhelpers import PROJECT_PARTS, REPO


def _without_ids(value):
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def test_committed_suites_checkpoints_and_definitions_match_the_code(built_project):
    for folder in PROJECT_PARTS[1:]:
        built = {p.name: p for p in (built_project / folder).glob("*.json")}
        committed = {p.name: p for p in (REPO / folder).glob("*.json")}
        assert sorted(built) == sorted(committed), folder
        for name, path in built.items():
            assert _without_ids(json.loads(committed[name].read_text())) == _without_ids(
                json.loads(path.read_text())
            ), f"{folder}/{name} differs from the code: run `kandev-dq init --force .`"
