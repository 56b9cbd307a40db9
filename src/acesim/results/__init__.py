"""Metrics, tables, traces and plots built from finished simulations."""
