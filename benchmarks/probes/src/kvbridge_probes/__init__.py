"""Probe modules: each binding technology with its defaults and no kvbridge translation."""
