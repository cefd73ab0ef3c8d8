"""``tokenwatt schema --out`` pointing somewhere unusable: a clear error, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenwatt.errors import InputError
from tokenwatt.records_io import export_schemas


def test_out_below_a_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        export_schemas(tmp_path / "file" / "sub")
    assert [str(p) for p in exc.value.problems] == [
        f"{tmp_path / 'file' / 'sub' / 'report.schema.json'}: cannot read or write the schema "
        "file: Not a directory"
    ]


@pytest.mark.parametrize("check", [False, True])
def test_a_folder_where_a_schema_file_goes_is_an_input_error(tmp_path: Path, check: bool) -> None:
    (tmp_path / "run.schema.json").mkdir()
    with pytest.raises(InputError) as exc:
        export_schemas(tmp_path, check=check)
    assert [str(p) for p in exc.value.problems] == [
        f"{tmp_path / 'run.schema.json'}: cannot read or write the schema file: a folder is "
        "in the way"
    ]


def test_a_schema_file_that_is_not_utf8_is_stale_and_rewritten(tmp_path: Path) -> None:
    export_schemas(tmp_path)
    (tmp_path / "report.schema.json").write_bytes(b"\xff\xfe")
    result = export_schemas(tmp_path)
    assert result.written == [tmp_path / "report.schema.json"]
    assert (tmp_path / "report.schema.json").read_text(encoding="utf-8").startswith("{")
