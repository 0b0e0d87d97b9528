"""The controls: determinism, agreement, reproductions, the corrections ledger, the neutrality control."""
