"""Pure policies of the admission cycle, one per file."""
