"""Measuring the box: the cost model, box profiles, Auto depth, thermal state, the batch-invariance probe."""
