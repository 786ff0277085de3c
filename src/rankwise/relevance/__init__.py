"""relevance layer."""
