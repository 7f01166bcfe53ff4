"""Output for people: short, aligned lines and tables (pure functions; cli.py prints them)."""
