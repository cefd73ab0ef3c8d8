"""Stage package: site."""
