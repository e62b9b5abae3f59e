"""Reading a report's dataset from SQLite stores or the fleet's PostgreSQL."""
