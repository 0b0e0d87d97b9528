"""The typed, frozen values one stage hands the next (the experiment: experiment.py, generated from the schema).

The lowest folder of the package but the root's own modules: it imports nothing of bracket, so every layer,
the engines' adapters included, may import it.
"""
