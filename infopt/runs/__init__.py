"""A run's folder and what outlives it: run ids and folders, atomic writes, trial files (rundir),
the results store that mirrors them (store) and the accepted run (accepted)."""
