"""Analyses and paper reproductions built on the simulator."""
