"""Stage package: collect."""
