"""bracket: benchmark LLM inference servers the way a careful experimenter would."""

__version__ = "0.1.0"
