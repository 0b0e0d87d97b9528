"""The Spark Arena / llama-benchy cell: run on a server, its text and chat request, read in both definitions."""
