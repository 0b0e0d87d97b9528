"""The byte account from tensor headers, memory bandwidth, the decode ceiling, and the host's steadiness."""
