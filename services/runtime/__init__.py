"""What every service stands on: the bus, the handler loop, settings, logging, health and the clock."""
