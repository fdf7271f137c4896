"""Pure policies of the admission cycle, one per file. They import the model, and of the state only the
``Snapshot`` and the read-only ``QueueView`` (``state.views``); never ``AdmissionState``."""
