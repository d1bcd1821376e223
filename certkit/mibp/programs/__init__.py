"""The exact step programs: the backend-neutral `Program`, its builder and MIBP encoding, the per-step
driver of
the program backends, and the solvers."""
