"""The experiment file: its schema, validation, design, prompts, and what is checked before the first block."""
