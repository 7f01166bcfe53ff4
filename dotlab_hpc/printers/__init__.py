"""Output for people: short, aligned lines and tables (pure functions; cli/ prints them)."""
