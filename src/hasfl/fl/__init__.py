"""Federated engine: aggregation, estimator, policies, local optimisers, the round loop."""
