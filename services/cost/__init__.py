"""The cost service: price catalogue and estimates (spend ledger and budgets come later)."""
