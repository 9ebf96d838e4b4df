"""End to end on a real Ray cluster: lifecycle, queue, drift, head restart, cancels and retries."""
