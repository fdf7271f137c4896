"""The server half of the runtime, what every service stands on: the handler loop, leases and leadership,
settings, health, metrics and the clock. The bus itself (connection, credentials, tracing) is ``bus``, shared
with the clients."""
