"""The admission queue's files on the shared root: ledgers, quotas, liveness holders, the serve lease,
locks, sent events and usage. Imports specs/, state.runs, state.audit and the shared helpers of state/."""
