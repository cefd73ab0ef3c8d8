"""Stage package: telemetry."""
