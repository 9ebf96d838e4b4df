"""A run's life on the shared root: its record, index, logs, secrets, end and failure class, settling
and checkpoints. Imports specs/, state.ray and the shared helpers of state/."""
