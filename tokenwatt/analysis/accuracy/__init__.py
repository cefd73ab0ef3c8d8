"""The accuracy gate, its paired statistics and the numeric scorer (pure)."""
