"""Tests of one area: labkit.sim: the simulated cluster, its scheduler and controllers, scenarios, racks on the sim."""
