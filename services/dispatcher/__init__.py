"""The dispatcher: the only service that talks to the Kubernetes API."""
