"""The model admission decides about: op records, the compiled queue book, nodes and agents, and the
orders and matching rules every higher layer uses. Imports nothing else of admission."""
