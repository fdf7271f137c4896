"""The web view (`opsched ui`, `opsched up --ui`): a read-only page of queues, ops, timelines and cost, updated
live. Its options are in ``options`` (cheap to import: the CLI's parser); the server in ``server``."""
