"""A block: its servers, its requests, the arena's cells and the controls inside it (runner.py).

Above arena/ and controls/, whose cells and control requests a block runs, and above measure/, whose
session starts each of its servers.
"""
