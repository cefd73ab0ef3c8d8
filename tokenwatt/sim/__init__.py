"""Stage package: sim."""
