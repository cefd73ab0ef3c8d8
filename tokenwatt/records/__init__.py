"""Record schemas: the benchmark spec, run records and report records, with migrations."""

from tokenwatt.records.load import (
    NEWEST_REPORT_VERSION,
    load_report,
    load_spec,
    migrate_report,
    parse_report,
    read_json,
    validate,
)
from tokenwatt.records.report_v1 import ConfigV1, ReportV1
from tokenwatt.records.report_v2 import ConfigV2, ReportV2, UpdateV2, v1_to_v2
from tokenwatt.records.report_v3 import ConfigV3, ReportV3, SearchWindowV3, v2_to_v3
from tokenwatt.records.run import RunRecord
from tokenwatt.records.spec import Spec, fingerprint, fingerprint_diff, fingerprint_fields

ReportRecord = ReportV3
"""The newest report record model."""

__all__ = [
    "NEWEST_REPORT_VERSION",
    "ConfigV1",
    "ConfigV2",
    "ConfigV3",
    "ReportRecord",
    "ReportV1",
    "ReportV2",
    "ReportV3",
    "RunRecord",
    "SearchWindowV3",
    "Spec",
    "UpdateV2",
    "fingerprint",
    "fingerprint_diff",
    "fingerprint_fields",
    "load_report",
    "load_spec",
    "migrate_report",
    "parse_report",
    "read_json",
    "v1_to_v2",
    "v2_to_v3",
    "validate",
]
