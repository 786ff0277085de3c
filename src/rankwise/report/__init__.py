"""Reports: terminal tables, JSON/CSV/TREC text, markdown and HTML."""
