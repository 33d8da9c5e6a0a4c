"""Which combinations (torch variant x Python x OS) can run, and why the others cannot."""
