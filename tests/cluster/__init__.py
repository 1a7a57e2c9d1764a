"""Tests of the cluster entry point: derivations, and a cluster of local processes."""
