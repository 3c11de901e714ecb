"""The acceptance ledger: every reply's acceptance kept across runs, and a warning when it falls."""
