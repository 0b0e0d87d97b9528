"""Server processes and one timed request on the wire: nothing here knows an engine or an experiment."""
