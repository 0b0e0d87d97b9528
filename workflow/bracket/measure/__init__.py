"""One server session and what runs beside it (pinning, priority, telemetry, the time left); runner.py, a block."""
