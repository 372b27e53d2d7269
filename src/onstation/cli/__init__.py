"""The command line: the operator's and the scripts' surface over the ledger and the plan."""
