"""The admission service: queues, ordering, concurrency, gates, and the operation lifecycle."""
