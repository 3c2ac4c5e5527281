"""The papers' table rows as reproduction conditions, and the paper-vs-measured rows of their runs."""
