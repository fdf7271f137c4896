"""The opsched services. They share nothing but events on NATS; no service imports another."""
