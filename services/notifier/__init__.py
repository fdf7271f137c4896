"""The notifier (issue 33 §2): notifications and webhooks out. So far its pure parts: the connections
file (``connections``), what an event triggers (``triggers``), the signature (``signature``) and each
sink's request (``sinks``). The service (durables, delivery, retries) is not built yet: docs/notifications.md."""
