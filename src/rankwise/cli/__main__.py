"""``python -m rankwise.cli``."""

from rankwise.cli import main

main()
