"""datasets layer."""
