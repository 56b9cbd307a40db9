"""Sub-commands of the `acesim` CLI, one module per command family."""
