"""The cost service: price catalogue, estimates, the actual-cost ledger and budget announcements."""
