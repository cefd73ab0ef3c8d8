"""Stage package: cloud."""
