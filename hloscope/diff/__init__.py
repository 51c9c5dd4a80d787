"""Compare two HLO modules (or two runs): side-by-side statistics and a structural matching of their instructions."""
