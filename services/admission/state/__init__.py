"""Admission's state: the op-lifecycle fold, its followers (the queue manager, the usage cache) and the
snapshot a cycle decides on. Imports only the model."""
